package alert

import (
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/notify"
)

// namespaceObjects are the objects of one namespace events are made of:
// the timeline's, and the Pipelines that give each event its repository.
type namespaceObjects struct {
	change.TimelineObjects
	pipelines []promotionv1alpha1.Pipeline
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

// alertable maps a moment of the timeline to the EventType an Alert
// subscribes to, if it is one: a finished promotion is sent as how it
// ended.
func alertable(m *change.Moment) (notificationv1alpha1.EventType, bool) {
	switch m.Event {
	case promotionv1alpha1.EventPromotionFinished:
		switch promotionv1alpha1.PromotionPhase(m.Phase) {
		case promotionv1alpha1.PromotionSucceeded:
			return notificationv1alpha1.EventPromotionSucceeded, true
		case promotionv1alpha1.PromotionFailed:
			return notificationv1alpha1.EventPromotionFailed, true
		}
		return "", false
	case promotionv1alpha1.EventReleaseDiscovered, promotionv1alpha1.EventPromotionAwaitingApproval, promotionv1alpha1.EventRolledBack,
		promotionv1alpha1.EventRolloutHalted, promotionv1alpha1.EventVerificationFailed, promotionv1alpha1.EventStackStalled,
		promotionv1alpha1.EventDriftDetected:
		return notificationv1alpha1.EventType(m.Event), true
	}
	return "", false
}

// facts returns every event of the timeline an Alert may send, oldest
// first. dashboard is the dashboard's external URL, or "".
func facts(objs *namespaceObjects, dashboard string) []fact {
	stages := map[string]*promotionv1alpha1.Stage{}
	for i := range objs.Stages {
		stages[objs.Stages[i].Name] = &objs.Stages[i]
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
	for _, m := range change.Timeline(&objs.TimelineObjects) {
		typ, ok := alertable(&m)
		if !ok {
			continue
		}
		e := notify.Event{
			Type: string(typ), Key: m.Key, Time: m.Time.Time, Namespace: m.Namespace, Kind: m.Kind, Name: m.Name,
			Pipeline: m.Pipeline, Stage: m.Stage, Release: m.Release, Commit: m.Commit, Phase: m.Phase, Message: m.Message,
			RepoURL: repos[m.Pipeline],
		}
		switch m.Kind {
		case "Release":
			e.Message, e.URL = m.Subject, link("pipelines", m.Namespace, m.Pipeline)
		case "Promotion":
			e.URL = link("promotions", m.Namespace, m.Name)
		case "Stack":
			e.URL = link("stacks", m.Namespace, m.Name)
		}
		if s := stages[m.Stage]; typ == notificationv1alpha1.EventPromotionAwaitingApproval && s != nil && s.Spec.Approval != nil {
			for _, a := range s.Spec.Approval.From {
				if a.User != "" {
					e.Approvers = append(e.Approvers, "user "+a.User)
				}
				if a.Group != "" {
					e.Approvers = append(e.Approvers, "group "+a.Group)
				}
			}
		}
		out = append(out, fact{typ: typ, stage: m.Stage, pipeline: m.Pipeline, event: e})
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
