package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// DefaultReleaseRetention is spec.releaseRetention when it is unset.
const DefaultReleaseRetention = 20

// pruneReleases deletes the Releases beyond spec.releaseRetention that
// nothing needs (see prunable). Each deletion is conditional on the
// Release being as it was listed, so one that a stage has just started to
// use is kept, and looked at again next time.
func (r *Reconciler) pruneReleases(ctx context.Context, s *session) (sreconcile.Result, error) {
	keep := int(s.pipeline.Spec.ReleaseRetention)
	if keep <= 0 {
		keep = DefaultReleaseRetention
	}
	if len(s.releases) <= keep {
		return sreconcile.ResultEmpty, nil
	}
	// The promotions that have not finished and name one of the
	// pipeline's releases, through an index: not every Promotion of the
	// namespace, which retention lets grow to thousands per stage.
	var unfinished []promotionv1alpha1.Promotion
	for i := range s.releases {
		var list promotionv1alpha1.PromotionList
		if err := r.Client.List(ctx, &list, client.InNamespace(s.pipeline.Namespace),
			client.MatchingFields{UnfinishedReleaseIndex: s.releases[i].Name}); err != nil {
			return sreconcile.ResultEmpty, sreconcile.NewGeneric(ReleaseListFailedReason, fmt.Errorf("listing the Promotions: %w", err))
		}
		unfinished = append(unfinished, list.Items...)
	}
	var pruned []string
	for _, rel := range prunable(s.releases, unfinished, s.pipeline.Status.LatestRelease, keep) {
		err := r.Client.Delete(ctx, rel, client.Preconditions{UID: &rel.UID, ResourceVersion: &rel.ResourceVersion})
		switch {
		case err == nil:
			pruned = append(pruned, rel.Name)
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		default:
			return sreconcile.ResultEmpty, sreconcile.NewGeneric(ReleaseDeleteFailedReason, fmt.Errorf("deleting Release %q: %w", rel.Name, err))
		}
	}
	if len(pruned) > 0 {
		r.Recorder.Eventf(s.pipeline, nil, corev1.EventTypeNormal, promotionv1alpha1.EventReleasesPruned, "Prune",
			"deleted %d release(s) beyond the retention of %d: %s", len(pruned), keep, strings.Join(pruned, ", "))
		log.FromContext(ctx).V(1).Info("pruned releases", "releases", pruned)
	}
	return sreconcile.ResultEmpty, nil
}

// prunable returns the releases to delete: those that are not among the
// keep newest (by commit time, then the later created) and that nothing
// needs. A release is needed while a stage runs it (status.currentlyIn),
// while a Promotion that has not finished names it, when it is the newest
// release verified in a stage other than the one that stage runs (its
// rollback target), and when it is the Pipeline's latest release.
func prunable(releases []promotionv1alpha1.Release, promotions []promotionv1alpha1.Promotion, latest string, keep int) []*promotionv1alpha1.Release {
	needed := map[string]bool{latest: true}
	for _, p := range promotions {
		if !p.Status.Phase.IsFinished() {
			needed[p.Spec.Release] = true
		}
	}
	rollback := map[string]*promotionv1alpha1.Release{} // per stage
	for i := range releases {
		rel := &releases[i]
		if len(rel.Status.CurrentlyIn) > 0 {
			needed[rel.Name] = true
		}
		for stage := range rel.Status.VerifiedIn {
			if _, runs := rel.Status.CurrentlyIn[stage]; runs {
				continue
			}
			if cur := rollback[stage]; cur == nil || newerVerification(rel, cur, stage) {
				rollback[stage] = rel
			}
		}
	}
	for _, rel := range rollback {
		needed[rel.Name] = true
	}

	order := make([]*promotionv1alpha1.Release, len(releases))
	for i := range releases {
		order[i] = &releases[i]
	}
	slices.SortFunc(order, func(a, b *promotionv1alpha1.Release) int {
		if c := commitTime(b).Compare(commitTime(a)); c != 0 {
			return c
		}
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(b.Name, a.Name)
	})
	var out []*promotionv1alpha1.Release
	for i, rel := range order {
		if i >= keep && !needed[rel.Name] {
			out = append(out, rel)
		}
	}
	return out
}

// newerVerification reports whether a was verified in stage after b was,
// or at the same time with a later commit.
func newerVerification(a, b *promotionv1alpha1.Release, stage string) bool {
	at, bt := a.Status.VerifiedIn[stage].Since, b.Status.VerifiedIn[stage].Since
	if !at.Equal(&bt) {
		return bt.Before(&at)
	}
	return commitTime(a).After(commitTime(b))
}
