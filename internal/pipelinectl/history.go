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
	"github.com/stackyard/stackyard/internal/change"
)

// HistoryEntry is one event of the audit trail: a moment of change
// management's one timeline (change.Timeline), in the shape
// `stackyard history -o json` prints.
type HistoryEntry = change.Moment

// History returns the audit trail of stage ("" for every stage, with the
// releases their pipelines discovered), oldest first: the moments of the
// timeline that are history (change.AuditEvents).
func (c *Client) History(ctx context.Context, stage string) ([]HistoryEntry, error) {
	var objs change.TimelineObjects
	var err error
	if objs.Promotions, err = c.promotions(ctx, stage); err != nil {
		return nil, err
	}
	if objs.Stages, err = c.stages(ctx, ""); err != nil {
		return nil, err
	}
	if stage == "" {
		var list promotionv1alpha1.ReleaseList
		if err := c.Client.List(ctx, &list, client.InNamespace(c.Namespace)); err != nil {
			return nil, fmt.Errorf("listing releases: %w", err)
		}
		objs.Releases = list.Items
	}
	var approvals promotionv1alpha1.ApprovalList
	if err := c.Client.List(ctx, &approvals, client.InNamespace(c.Namespace)); err != nil {
		return nil, fmt.Errorf("listing approvals: %w", err)
	}
	objs.Approvals = approvals.Items
	var out []HistoryEntry
	for _, m := range change.Timeline(&objs) {
		if slices.Contains(change.AuditEvents, m.Event) && (stage == "" || m.Stage == stage) {
			out = append(out, m)
		}
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
