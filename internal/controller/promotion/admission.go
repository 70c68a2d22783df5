package promotion

import (
	"context"

	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// reconcileAdmission fails closed: a Pending promotion into a gated stage
// (change.Gated) waits while the admission policies that keep approvals
// and records true are missing or altered (change.AdmissionGuard), since
// without them an approval or a record could be forged. It says so in the
// promotion's message; the Stage says the same.
func (s *session) reconcileAdmission(ctx context.Context) (sreconcile.Result, error) {
	if !s.pending() {
		return sreconcile.ResultEmpty, nil
	}
	switch held, err := s.r.Admission.Holds(ctx, s.stage); {
	case held:
		return sreconcile.ResultEmpty, sreconcile.NewWaiting(change.ReasonAdmissionPolicies, err, change.HoldRecheck)
	case err != nil:
		return sreconcile.ResultEmpty, sreconcile.NewGeneric(change.ReasonAdmissionPolicies, err)
	}
	return sreconcile.ResultEmpty, nil
}
