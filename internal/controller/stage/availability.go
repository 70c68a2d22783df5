package stage

import (
	"context"
	"fmt"
	"time"

	"github.com/stackyard/stackyard/internal/change"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/schedule"
)

// reconcileAvailability decides what the stage waits for, in this order: a
// freeze, a promotion that runs or waits, the next release's availability
// (upstream verification, soak), the promotion windows, and a person when
// auto-promotion is off. With nothing in the way, the release is left for
// reconcileAutoPromotion.
func (s *session) reconcileAvailability(context.Context) (sreconcile.Result, error) {
	st, spec := &s.stage.Status, &s.stage.Spec
	current := ""
	if st.CurrentRelease != nil {
		current = st.CurrentRelease.Name
	}
	switch p := s.active; {
	case spec.Freeze != nil:
		st.WaitingFor = "frozen: " + spec.Freeze.Reason
		return sreconcile.ResultSuccess, nil
	case p != nil && p.Status.Phase == promotionv1alpha1.PromotionRunning:
		st.WaitingFor = fmt.Sprintf("promotion %s running", p.Name)
		return sreconcile.ResultSuccess, nil
	case p != nil && !supersedable(p):
		st.WaitingFor = fmt.Sprintf("promotion %s pending", p.Name)
		if p.Status.Message != "" {
			st.WaitingFor += ": " + p.Status.Message
		}
		return sreconcile.ResultSuccess, nil
	}
	sel := change.Select(s.stage, s.releases, current, s.now)
	s.wakeAt = sel.WakeAt
	if sel.Release == nil {
		st.WaitingFor = sel.Waiting
		return sreconcile.ResultSuccess, nil
	}
	name := sel.Release.Name
	opens, ok := schedule.OpenAt(s.windows, s.now)
	switch {
	case !ok:
		st.WaitingFor = fmt.Sprintf("release %s: outside promotion windows; none opens again", name)
	case opens.After(s.now):
		st.WaitingFor = fmt.Sprintf("release %s: outside promotion windows until %s", name, opens.UTC().Format(time.RFC3339))
		if s.wakeAt.IsZero() || opens.Before(s.wakeAt) {
			s.wakeAt = opens
		}
	case !autoPromotes(s.stage):
		st.WaitingFor = fmt.Sprintf("release %s: waiting for a person to promote it (auto-promotion is off)", name)
	default:
		st.WaitingFor, s.pick = "", sel.Release
	}
	return sreconcile.ResultSuccess, nil
}

// supersedable reports whether p, the stage's pending promotion, gives way
// to a newer release: one auto-promotion asked for (not a rollback, not a
// person's request) that has not started, e.g. because it waits for
// approval. Auto-promotion then asks for the newer release, and the
// Promotion controller's queue rule (the newest pending runs) aborts p as
// superseded, so a gate never holds a stale release back.
func supersedable(p *promotionv1alpha1.Promotion) bool {
	return p.Status.Phase != promotionv1alpha1.PromotionRunning &&
		p.Spec.RequestedBy == promotionv1alpha1.RequestedByAutoPromotion && !p.Spec.Rollback
}
