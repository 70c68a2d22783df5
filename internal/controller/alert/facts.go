package alert

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/notify"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// namespaceObjects are the objects of one namespace events are made of.
type namespaceObjects struct {
	promotions []promotionv1alpha1.Promotion
	releases   []promotionv1alpha1.Release
	stacks     []pulumiv1.Stack
	stages     []promotionv1alpha1.Stage
	pipelines  []promotionv1alpha1.Pipeline
}

// fact is an event that holds now, with what the Alert's filters need.
type fact struct {
	typ notificationv1alpha1.EventType
	// stage is the stage the event concerns; "" for a release, or a Stack
	// no stage binds.
	stage string
	// pipeline is the pipeline the event concerns, if known.
	pipeline string
	event    notify.Event
}

// facts returns every event that holds in objs, oldest first. dashboard
// is the dashboard's external URL, or "".
func facts(objs *namespaceObjects, dashboard string) []fact {
	stages := map[string]*promotionv1alpha1.Stage{}
	stackStage := map[string]*promotionv1alpha1.Stage{}
	for i := range objs.stages {
		s := &objs.stages[i]
		stages[s.Name] = s
		for _, b := range s.Spec.Stacks {
			stackStage[b.Name] = s
		}
	}
	releases := map[string]*promotionv1alpha1.Release{}
	for i := range objs.releases {
		releases[objs.releases[i].Name] = &objs.releases[i]
	}
	repos := map[string]string{}
	for _, p := range objs.pipelines {
		repos[p.Name] = p.Spec.Git.RepoURL
	}
	link := func(kind, ns, name string) string {
		if dashboard == "" {
			return ""
		}
		return strings.TrimRight(dashboard, "/") + "/" + kind + "/" + ns + "/" + name
	}

	var out []fact
	for i := range objs.releases {
		r := &objs.releases[i]
		out = append(out, fact{typ: notificationv1alpha1.EventReleaseDiscovered, pipeline: r.Spec.Pipeline, event: notify.Event{
			Type: string(notificationv1alpha1.EventReleaseDiscovered), Key: "release/" + string(r.UID) + "/discovered",
			Time: r.CreationTimestamp.Time, Namespace: r.Namespace, Kind: "Release", Name: r.Name,
			Pipeline: r.Spec.Pipeline, Release: r.Name, Commit: r.Spec.Commit.SHA, Message: r.Spec.Commit.Subject,
			URL: link("pipelines", r.Namespace, r.Spec.Pipeline), RepoURL: repos[r.Spec.Pipeline],
		}})
	}
	for i := range objs.promotions {
		out = append(out, promotionFacts(&objs.promotions[i], stages, releases, repos, link)...)
	}
	for i := range objs.stacks {
		out = append(out, stackFacts(&objs.stacks[i], stackStage[objs.stacks[i].Name], link)...)
	}
	slices.SortStableFunc(out, func(a, b fact) int {
		return cmp.Or(a.event.Time.Compare(b.event.Time), strings.Compare(a.event.Key, b.event.Key))
	})
	return out
}

// promotionFacts returns the events a Promotion's status makes true.
func promotionFacts(p *promotionv1alpha1.Promotion, stages map[string]*promotionv1alpha1.Stage,
	releases map[string]*promotionv1alpha1.Release, repos map[string]string, link func(kind, ns, name string) string) []fact {
	base := notify.Event{
		Namespace: p.Namespace, Kind: "Promotion", Name: p.Name, Stage: p.Spec.Stage, Release: p.Spec.Release,
		Commit: p.Status.Commit, Phase: string(p.Status.Phase), Message: p.Status.Message,
		URL: link("promotions", p.Namespace, p.Name),
	}
	stage := stages[p.Spec.Stage]
	if stage != nil {
		base.Pipeline = stage.Spec.Pipeline
	}
	if r := releases[p.Spec.Release]; r != nil {
		base.Pipeline = cmp.Or(base.Pipeline, r.Spec.Pipeline)
		base.Commit = cmp.Or(base.Commit, r.Spec.Commit.SHA)
	}
	base.RepoURL = repos[base.Pipeline]
	ended := p.CreationTimestamp.Time
	if p.Status.EndTime != nil {
		ended = p.Status.EndTime.Time
	}
	var out []fact
	add := func(typ notificationv1alpha1.EventType, suffix string, at time.Time) {
		e := base
		e.Type, e.Key, e.Time = string(typ), "promotion/"+string(p.UID)+"/"+suffix, at
		if typ == notificationv1alpha1.EventPromotionAwaitingApproval && stage != nil && stage.Spec.Approval != nil {
			for _, a := range stage.Spec.Approval.From {
				if a.User != "" {
					e.Approvers = append(e.Approvers, "user "+a.User)
				}
				if a.Group != "" {
					e.Approvers = append(e.Approvers, "group "+a.Group)
				}
			}
		}
		out = append(out, fact{typ: typ, stage: p.Spec.Stage, pipeline: base.Pipeline, event: e})
	}
	switch p.Status.Phase {
	case promotionv1alpha1.PromotionPending:
		if p.AwaitsApproval() {
			add(notificationv1alpha1.EventPromotionAwaitingApproval, "AwaitingApproval", p.CreationTimestamp.Time)
		}
	case promotionv1alpha1.PromotionSucceeded:
		add(notificationv1alpha1.EventPromotionSucceeded, "Succeeded", ended)
		if p.Spec.Rollback {
			add(notificationv1alpha1.EventRolledBack, "RolledBack", ended)
		}
	case promotionv1alpha1.PromotionFailed:
		add(notificationv1alpha1.EventPromotionFailed, "Failed", ended)
	}
	if v := p.Status.Verification; v != nil && v.Phase == "Failed" {
		add(notificationv1alpha1.EventVerificationFailed, "VerificationFailed", ended)
	}
	return out
}

// stackFacts returns the events a Stack's status makes true; stage is
// the Stage that binds it, or nil.
func stackFacts(s *pulumiv1.Stack, stage *promotionv1alpha1.Stage, link func(kind, ns, name string) string) []fact {
	base := notify.Event{Namespace: s.Namespace, Kind: "Stack", Name: s.Name, URL: link("stacks", s.Namespace, s.Name)}
	var stageName, pipeline string
	if stage != nil {
		stageName, pipeline = stage.Name, stage.Spec.Pipeline
		base.Stage, base.Pipeline = stageName, pipeline
	}
	if s.Status.LastUpdate != nil {
		base.Commit = s.Status.LastUpdate.LastSuccessfulCommit
	}
	var out []fact
	if sreconcile.IsStalled(s.Status.Conditions) {
		c := apimeta.FindStatusCondition(s.Status.Conditions, sreconcile.StalledCondition)
		e := base
		e.Type, e.Phase, e.Message = string(notificationv1alpha1.EventStackStalled), "Stalled", c.Message
		e.Key = "stack/" + string(s.UID) + "/stalled/" + strconv.FormatInt(s.Generation, 10)
		e.Time = c.LastTransitionTime.Time
		out = append(out, fact{typ: notificationv1alpha1.EventStackStalled, stage: stageName, pipeline: pipeline, event: e})
	}
	if d := s.Status.LastDriftCheck; d != nil && d.Drifted && !d.Failed {
		e := base
		e.Type, e.Phase, e.Message = string(notificationv1alpha1.EventDriftDetected), "Drifted", d.Message
		e.Key = "stack/" + string(s.UID) + "/drift/" + d.Name
		e.Time = d.Time.Time
		out = append(out, fact{typ: notificationv1alpha1.EventDriftDetected, stage: stageName, pipeline: pipeline, event: e})
	}
	return out
}

// pending returns the facts a now wants delivered to provider type pt:
// subscribed, within its filters, not older than the Alert, not delivered
// yet.
func pending(a *notificationv1alpha1.Alert, pt notificationv1alpha1.ProviderType, all []fact) []fact {
	delivered := map[string]bool{}
	for _, d := range a.Status.Delivered {
		delivered[d.Key] = true
	}
	var out []fact
	for _, f := range all {
		switch {
		case !slices.Contains(a.Spec.Events, f.typ),
			!notify.Supports(pt, f.typ),
			f.event.Time.Before(a.CreationTimestamp.Time),
			a.Status.Watermark != nil && !f.event.Time.After(a.Status.Watermark.Time),
			delivered[f.event.Key],
			len(a.Spec.Stages) > 0 && f.typ != notificationv1alpha1.EventReleaseDiscovered && !slices.Contains(a.Spec.Stages, f.stage),
			len(a.Spec.Pipelines) > 0 && !slices.Contains(a.Spec.Pipelines, f.pipeline):
			continue
		}
		out = append(out, f)
	}
	return out
}

// remember records a delivered event in status, keeping the last
// MaxDeliveredKeys and moving the watermark past the ones forgotten.
func remember(st *notificationv1alpha1.AlertStatus, e *notify.Event, now time.Time) {
	st.Delivered = append(st.Delivered, notificationv1alpha1.DeliveredEvent{Key: e.Key, Time: metav1.NewTime(e.Time)})
	for len(st.Delivered) > notificationv1alpha1.MaxDeliveredKeys {
		old := st.Delivered[0]
		st.Delivered = st.Delivered[1:]
		if st.Watermark == nil || old.Time.After(st.Watermark.Time) {
			w := old.Time
			st.Watermark = &w
		}
	}
	t := metav1.NewTime(now)
	st.LastDelivered = &t
	st.DeliveredCount++
}
