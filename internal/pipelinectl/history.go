package pipelinectl

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// HistoryEntry is one event of the audit trail, read back from the
// immutable objects that record it: a Release's creation, a Promotion's
// creation, start and end, an Approval's creation.
type HistoryEntry struct {
	// Time is when it happened.
	Time metav1.Time `json:"time"`
	// Event is one of the audit trail's kinds of event (of the
	// vocabulary in promotionv1alpha1): ReleaseDiscovered,
	// PromotionRequested, PolicyFired, ApprovalGiven, ApprovalRejected,
	// PromotionStarted and PromotionFinished.
	Event string `json:"event"`
	// Pipeline is the pipeline it belongs to.
	Pipeline string `json:"pipeline,omitempty"`
	// Stage is the stage, for promotion events.
	Stage string `json:"stage,omitempty"`
	// Release is the release.
	Release string `json:"release"`
	// Commit is the release's commit SHA, when known.
	Commit string `json:"commit,omitempty"`
	// Promotion is the Promotion, for promotion events.
	Promotion string `json:"promotion,omitempty"`
	// Rollback marks a rollback.
	Rollback bool `json:"rollback,omitempty"`
	// By is who asked, for a request, or who decided, for an approval.
	By string `json:"by,omitempty"`
	// Groups are the groups of who decided, for an approval.
	Groups []string `json:"groups,omitempty"`
	// Phase is how a promotion ended, or the decision (Approve, Reject)
	// of an approval.
	Phase string `json:"phase,omitempty"`
	// Message is the promotion's message when it ended, the approver's
	// comment, or a fired policy rule's message.
	Message string `json:"message,omitempty"`
	// Policy is the policy rule that fired, for PolicyFired.
	Policy string `json:"policy,omitempty"`
}

// History returns the audit trail of stage ("" for every stage, with the
// releases their pipelines discovered), oldest first.
func (c *Client) History(ctx context.Context, stage string) ([]HistoryEntry, error) {
	promotions, err := c.promotions(ctx, stage)
	if err != nil {
		return nil, err
	}
	pipelineOf := map[string]string{}
	stages, err := c.stages(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, s := range stages {
		pipelineOf[s.Name] = s.Spec.Pipeline
	}
	var out []HistoryEntry
	if stage == "" {
		var list promotionv1alpha1.ReleaseList
		if err := c.Client.List(ctx, &list, client.InNamespace(c.Namespace)); err != nil {
			return nil, fmt.Errorf("listing releases: %w", err)
		}
		for _, r := range list.Items {
			out = append(out, HistoryEntry{
				Time: r.CreationTimestamp, Event: promotionv1alpha1.EventReleaseDiscovered, Pipeline: r.Spec.Pipeline,
				Release: r.Name, Commit: r.Spec.Commit.SHA,
			})
		}
	}
	for _, p := range promotions {
		base := HistoryEntry{
			Pipeline: pipelineOf[p.Spec.Stage], Stage: p.Spec.Stage, Release: p.Spec.Release, Commit: p.Status.Commit,
			Promotion: p.Name, Rollback: p.Spec.Rollback,
		}
		req := base
		req.Time, req.Event, req.By = p.CreationTimestamp, promotionv1alpha1.EventPromotionRequested, p.Spec.RequestedBy
		out = append(out, req)
		for _, r := range p.Status.Policies {
			if r.Fired {
				fired := base
				fired.Time, fired.Event, fired.Policy, fired.Phase, fired.Message = p.CreationTimestamp, promotionv1alpha1.EventPolicyFired, r.Name, string(r.Action), r.Message
				out = append(out, fired)
			}
		}
		if t := p.Status.StartTime; t != nil {
			started := base
			started.Time, started.Event = *t, promotionv1alpha1.EventPromotionStarted
			out = append(out, started)
		}
		if t := p.Status.EndTime; t != nil && p.Status.Phase.IsFinished() {
			ended := base
			ended.Time, ended.Event, ended.Phase, ended.Message = *t, promotionv1alpha1.EventPromotionFinished, string(p.Status.Phase), p.Status.Message
			out = append(out, ended)
		}
	}
	decisions, err := c.decisions(ctx, stage, promotions, pipelineOf)
	if err != nil {
		return nil, err
	}
	out = append(out, decisions...)
	slices.SortStableFunc(out, func(a, b HistoryEntry) int {
		return cmp.Or(a.Time.Time.Compare(b.Time.Time), eventOrder(a.Event)-eventOrder(b.Event), strings.Compare(a.Promotion, b.Promotion))
	})
	return out, nil
}

// eventOrder orders events of the same second as they happen.
func eventOrder(event string) int {
	return slices.Index([]string{
		promotionv1alpha1.EventReleaseDiscovered, promotionv1alpha1.EventPromotionRequested, promotionv1alpha1.EventPolicyFired, promotionv1alpha1.EventApprovalGiven, promotionv1alpha1.EventApprovalRejected, promotionv1alpha1.EventPromotionStarted, promotionv1alpha1.EventPromotionFinished,
	}, event)
}

// decisions are the approvals and rejections given on the promotions of
// stage ("" for every stage), one entry each, whether they counted or not.
func (c *Client) decisions(ctx context.Context, stage string, promotions []promotionv1alpha1.Promotion, pipelineOf map[string]string) ([]HistoryEntry, error) {
	var list promotionv1alpha1.ApprovalList
	if err := c.Client.List(ctx, &list, client.InNamespace(c.Namespace)); err != nil {
		return nil, fmt.Errorf("listing approvals: %w", err)
	}
	byName := map[string]*promotionv1alpha1.Promotion{}
	for i := range promotions {
		byName[promotions[i].Name] = &promotions[i]
	}
	var out []HistoryEntry
	for _, a := range list.Items {
		spec := a.Spec
		if stage != "" && spec.Stage != stage {
			continue
		}
		e := HistoryEntry{
			Time: a.CreationTimestamp, Event: promotionv1alpha1.EventApprovalGiven, Pipeline: pipelineOf[spec.Stage], Stage: spec.Stage,
			Promotion: spec.Promotion, By: spec.User, Groups: spec.Groups, Phase: string(spec.Decision), Message: spec.Comment,
		}
		if spec.Decision == promotionv1alpha1.Reject {
			e.Event = promotionv1alpha1.EventApprovalRejected
		}
		if p := byName[spec.Promotion]; p != nil {
			e.Release, e.Commit, e.Rollback = p.Spec.Release, p.Status.Commit, p.Spec.Rollback
		}
		out = append(out, e)
	}
	return out, nil
}

// ReleaseRow is one release as `stackyard releases` shows it.
type ReleaseRow struct {
	// Name is the Release's name.
	Name string `json:"name"`
	// Commit is its full commit SHA.
	Commit string `json:"commit"`
	// Tag is the tag that made it a release, if any.
	Tag string `json:"tag,omitempty"`
	// Subject is its commit subject.
	Subject string `json:"subject,omitempty"`
	// Author is its commit's author.
	Author string `json:"author,omitempty"`
	// Time is its commit time.
	Time *metav1.Time `json:"time,omitempty"`
	// CurrentlyIn lists the stages that run it, by name.
	CurrentlyIn []string `json:"currentlyIn,omitempty"`
	// VerifiedIn lists the stages that verified it, by name.
	VerifiedIn []string `json:"verifiedIn,omitempty"`
	// FailedIn lists the stages where it failed, by name.
	FailedIn []string `json:"failedIn,omitempty"`
}

// Releases returns the releases of pipeline, newest commit first.
func (c *Client) Releases(ctx context.Context, pipeline string) ([]ReleaseRow, error) {
	releases, err := c.releases(ctx, pipeline)
	if err != nil {
		return nil, err
	}
	rows := make([]ReleaseRow, 0, len(releases))
	for _, r := range releases {
		commit := r.Spec.Commit
		rows = append(rows, ReleaseRow{
			Name: r.Name, Commit: commit.SHA, Tag: commit.Tag, Subject: commit.Subject, Author: commit.Author, Time: commit.Time,
			CurrentlyIn: slices.Sorted(maps.Keys(r.Status.CurrentlyIn)), VerifiedIn: slices.Sorted(maps.Keys(r.Status.VerifiedIn)),
			FailedIn: slices.Sorted(maps.Keys(r.Status.FailedIn)),
		})
	}
	slices.SortStableFunc(rows, func(a, b ReleaseRow) int {
		return cmp.Or(timeOf(b.Time).Compare(timeOf(a.Time)), strings.Compare(a.Name, b.Name))
	})
	return rows, nil
}

// timeOf is t's time, or the zero time.
func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}
