package stage

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/stackyard/stackyard/internal/change"

	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// MaxHistory is how many entries status.history keeps.
const MaxHistory = 20

// observePromotions reads the stage's Promotions and its pipeline's
// Releases, and from them the release the stage runs (the one whose
// status.currentlyIn names the stage), its history, and the promotion
// that runs or waits.
func (s *session) observePromotions(ctx context.Context) (sreconcile.Result, error) {
	ns := s.stage.Namespace
	var promotions promotionv1alpha1.PromotionList
	if err := s.r.Client.List(ctx, &promotions, client.InNamespace(ns), client.MatchingFields{change.PromotionStageIndex: s.stage.Name}); err != nil {
		return sreconcile.ResultEmpty, sreconcile.NewGeneric("", fmt.Errorf("listing the stage's promotions: %w", err))
	}
	releases, err := change.ListReleases(ctx, s.r.Client, ns, s.stage.Spec.Pipeline)
	if err != nil {
		return sreconcile.ResultEmpty, sreconcile.NewGeneric("", err)
	}
	s.releases = releases
	s.promotions = map[string]*promotionv1alpha1.Promotion{}
	for i := range promotions.Items {
		p := &promotions.Items[i]
		s.promotions[p.Name] = p
	}
	s.active = Active(promotions.Items)
	st := &s.stage.Status
	st.CurrentRelease = currentRelease(s.stage.Name, releases, s.promotions, st.History)
	st.History = history(st.History, promotions.Items, releases)
	return sreconcile.ResultEmpty, nil
}

// Active returns, of a stage's promotions, the Running one (the oldest,
// should there be several), else the newest Pending one, else nil.
func Active(promotions []promotionv1alpha1.Promotion) *promotionv1alpha1.Promotion {
	var running, pending *promotionv1alpha1.Promotion
	for i := range promotions {
		p := &promotions[i]
		switch p.Status.Phase {
		case promotionv1alpha1.PromotionRunning:
			if running == nil || change.CompareAge(p, running) < 0 {
				running = p
			}
		case promotionv1alpha1.PromotionPending, "":
			if pending == nil || change.CompareAge(p, pending) > 0 {
				pending = p
			}
		}
	}
	if running != nil {
		return running
	}
	return pending
}

// currentRelease is the release whose status.currentlyIn names stage (the
// most recent, while a promotion moves the entry), or nil.
func currentRelease(stage string, releases []promotionv1alpha1.Release, promotions map[string]*promotionv1alpha1.Promotion,
	history []promotionv1alpha1.StageRelease) *promotionv1alpha1.StageRelease {
	var cur *promotionv1alpha1.StageRelease
	for _, r := range releases {
		in, ok := r.Status.CurrentlyIn[stage]
		if !ok || (cur != nil && !in.Since.After(cur.Since.Time)) {
			continue
		}
		cur = &promotionv1alpha1.StageRelease{
			Name: r.Name, SHA: r.Spec.Commit.SHA, Subject: r.Spec.Commit.Subject, Since: in.Since, Promotion: in.Promotion,
		}
		if p := promotions[in.Promotion]; p != nil {
			cur.Rollback = p.Spec.Rollback
		} else if i := slices.IndexFunc(history, func(h promotionv1alpha1.StageRelease) bool { return h.Promotion == in.Promotion }); i >= 0 {
			cur.Rollback = history[i].Rollback
		}
	}
	return cur
}

// history merges the succeeded promotions into the recorded history (which
// keeps the entries of promotions deleted since), newest first, at most
// MaxHistory entries.
func history(recorded []promotionv1alpha1.StageRelease, promotions []promotionv1alpha1.Promotion, releases []promotionv1alpha1.Release) []promotionv1alpha1.StageRelease {
	out := slices.Clone(recorded)
	for _, p := range promotions {
		if p.Status.Phase != promotionv1alpha1.PromotionSucceeded || p.Status.EndTime == nil ||
			slices.ContainsFunc(out, func(h promotionv1alpha1.StageRelease) bool { return h.Promotion == p.Name }) {
			continue
		}
		entry := promotionv1alpha1.StageRelease{
			Name: p.Spec.Release, SHA: p.Status.Commit, Since: *p.Status.EndTime, Promotion: p.Name, Rollback: p.Spec.Rollback,
		}
		if i := slices.IndexFunc(releases, func(r promotionv1alpha1.Release) bool { return r.Name == p.Spec.Release }); i >= 0 {
			entry.Subject = releases[i].Spec.Commit.Subject
		}
		out = append(out, entry)
	}
	slices.SortStableFunc(out, func(a, b promotionv1alpha1.StageRelease) int {
		if c := b.Since.Compare(a.Since.Time); c != 0 {
			return c
		}
		return strings.Compare(b.Promotion, a.Promotion)
	})
	if len(out) > MaxHistory {
		out = out[:MaxHistory]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
