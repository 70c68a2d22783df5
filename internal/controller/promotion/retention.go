package promotion

import (
	"context"
	"slices"
	"time"

	"github.com/stackyard/stackyard/internal/change"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// DefaultPromotionRetention is how many finished promotions of a stage are
// kept when the Pipeline does not say (or is gone).
const DefaultPromotionRetention = 100

// collectWithin is how long after a promotion finished its reconciles
// still collect its stage's old promotions.
const collectWithin = 10 * time.Minute

// garbageCollect keeps, once the promotion has finished, the Pipeline's
// spec.promotionRetention finished promotions of its stage, newest first
// (this one among them), and deletes the older ones. A failure is only
// logged: old records cost space, not correctness, and the next finished
// promotion tries again.
//
// Only a promotion that finished within collectWithin collects. Every
// finished promotion is reconciled again at each start of the operator
// and each resync; were each to list its stage's promotions, a stage with
// n of them would cost n lists of n, and retention allows 10,000. The
// promotion whose finishing made a record one too many collects it.
func (s *session) garbageCollect(ctx context.Context) (sreconcile.Result, error) {
	if !collects(s.p, s.now) {
		return sreconcile.ResultEmpty, nil
	}
	logger := log.FromContext(ctx)
	var list promotionv1alpha1.PromotionList
	if err := s.r.Client.List(ctx, &list, client.InNamespace(s.p.Namespace), client.MatchingFields{change.PromotionStageIndex: s.p.Spec.Stage}); err != nil {
		logger.Error(err, "listing promotions for retention")
		return sreconcile.ResultEmpty, nil
	}
	doomed := Expired(s.p, list.Items, s.retention(ctx))
	for i := range doomed {
		if err := s.r.Client.Delete(ctx, &doomed[i], client.Preconditions{UID: &doomed[i].UID}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			logger.Error(err, "deleting an old promotion", "promotion", doomed[i].Name)
		}
	}
	if len(doomed) > 0 {
		logger.V(1).Info("deleted old promotions", "stage", s.p.Spec.Stage, "count", len(doomed))
	}
	return sreconcile.ResultEmpty, nil
}

// collects reports whether p, at now, collects its stage's old
// promotions: it has finished, within collectWithin (or at a time it does
// not record).
func collects(p *promotionv1alpha1.Promotion, now time.Time) bool {
	if !p.Status.Phase.IsFinished() {
		return false
	}
	return p.Status.EndTime == nil || now.Sub(p.Status.EndTime.Time) < collectWithin
}

// Expired returns the finished promotions of all (those of one stage, self
// as it is now in place of its stored copy) beyond the newest keep.
func Expired(self *promotionv1alpha1.Promotion, all []promotionv1alpha1.Promotion, keep int) []promotionv1alpha1.Promotion {
	finished := []promotionv1alpha1.Promotion{*self}
	for _, p := range all {
		if p.Name != self.Name && p.Status.Phase.IsFinished() {
			finished = append(finished, p)
		}
	}
	if !self.Status.Phase.IsFinished() {
		finished = finished[1:]
	}
	slices.SortFunc(finished, func(a, b promotionv1alpha1.Promotion) int { return change.CompareAge(&b, &a) })
	if len(finished) <= keep {
		return nil
	}
	return finished[keep:]
}

// retention is the Pipeline's promotionRetention, or the default.
func (s *session) retention(ctx context.Context) int {
	name := s.p.Labels[promotionv1alpha1.PipelineLabel]
	if s.stage != nil {
		name = s.stage.Spec.Pipeline
	}
	pipeline, err := get(ctx, s.r.Client, s.p.Namespace, "Pipeline", name, &promotionv1alpha1.Pipeline{})
	if err != nil {
		log.FromContext(ctx).Error(err, "reading the pipeline for retention", "pipeline", name)
	}
	if pipeline == nil || pipeline.Spec.PromotionRetention < 1 {
		return DefaultPromotionRetention
	}
	return int(pipeline.Spec.PromotionRetention)
}
