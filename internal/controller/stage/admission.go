package stage

import (
	"context"

	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// reconcileAdmission makes a gated stage (change.Gated) say, in its
// status and so on the dashboard, that nothing is promoted into it while
// the admission policies are missing or altered, and keeps it from asking
// for automatic promotions meanwhile. The wait becomes a stall after
// StallAfter: only an administrator can install the policies again.
func (s *session) reconcileAdmission(ctx context.Context) (sreconcile.Result, error) {
	switch held, err := s.r.Admission.Holds(ctx, s.stage); {
	case held:
		return sreconcile.ResultEmpty, &sreconcile.Waiting{Reason: change.ReasonAdmissionPolicies, Err: err, RequeueAfter: change.HoldRecheck, Bounded: true}
	case err != nil:
		return sreconcile.ResultEmpty, sreconcile.NewGeneric(change.ReasonAdmissionPolicies, err)
	}
	return sreconcile.ResultEmpty, nil
}
