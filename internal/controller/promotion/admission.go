package promotion

import (
	"context"
	"errors"
	"time"

	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// ReasonAdmissionPolicies is the reason of the wait of a promotion into a
// gated stage while the admission policies are not in force.
const ReasonAdmissionPolicies = "AdmissionPoliciesNotInForce"

// admissionWait is how often a promotion held by the guard looks again.
const admissionWait = 15 * time.Second

// reconcileAdmission fails closed: a Pending promotion into a gated stage
// (change.Gated) waits while the admission policies that keep approvals
// and records true are missing or altered (change.AdmissionGuard), since
// without them an approval or a record could be forged. It says so in the
// promotion's message; the Stage says the same.
func (s *session) reconcileAdmission(ctx context.Context) (sreconcile.Result, error) {
	if !s.pending() || s.r.Admission == nil || !change.Gated(s.stage) {
		return sreconcile.ResultEmpty, nil
	}
	err := s.r.Admission.Check(ctx)
	switch {
	case errors.Is(err, change.ErrAdmissionPolicies):
		return sreconcile.ResultEmpty, sreconcile.NewWaiting(ReasonAdmissionPolicies, err, admissionWait)
	case err != nil:
		return sreconcile.ResultEmpty, sreconcile.NewGeneric(ReasonAdmissionPolicies, err)
	}
	return sreconcile.ResultEmpty, nil
}
