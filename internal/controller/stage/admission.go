package stage

import (
	"context"
	"errors"
	"time"

	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// ReasonAdmissionPolicies is the reason of a gated stage that waits, and
// in time stalls, while the admission policies are not in force.
const ReasonAdmissionPolicies = "AdmissionPoliciesNotInForce"

// admissionWait is how often such a stage looks again.
const admissionWait = 15 * time.Second

// reconcileAdmission makes a gated stage (change.Gated) say, in its
// status and so on the dashboard, that nothing is promoted into it while
// the admission policies are missing or altered, and keeps it from asking
// for automatic promotions meanwhile. The wait becomes a stall after
// StallAfter: only an administrator can install the policies again.
func (s *session) reconcileAdmission(ctx context.Context) (sreconcile.Result, error) {
	if s.r.Admission == nil || !change.Gated(s.stage) {
		return sreconcile.ResultEmpty, nil
	}
	err := s.r.Admission.Check(ctx)
	switch {
	case errors.Is(err, change.ErrAdmissionPolicies):
		return sreconcile.ResultEmpty, &sreconcile.Waiting{Reason: ReasonAdmissionPolicies, Err: err, RequeueAfter: admissionWait, Bounded: true}
	case err != nil:
		return sreconcile.ResultEmpty, sreconcile.NewGeneric(ReasonAdmissionPolicies, err)
	}
	return sreconcile.ResultEmpty, nil
}
