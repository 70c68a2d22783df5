package stack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// finish turns the outcome of the reconcile into the three kstatus
// conditions, observedGeneration and observedReconcileRequest, patches the
// status once, and maps the outcome to controller-runtime's result. It
// runs, deferred, on every path, so that every error a step returns is in
// the Stack's status: a failure that lasts longer than the stall bound
// becomes a stall (sreconcile.Escalate), and a new stall is announced once
// as a Warning event.
func (s *session) finish(ctx context.Context, res sreconcile.Result, err error) (ctrl.Result, error) {
	st := &s.stack.Status
	deleting := !s.stack.DeletionTimestamp.IsZero()
	if !deleting || err != nil {
		err = sreconcile.Escalate(st.Conditions, s.stack.Generation, err, s.now, s.r.stallAfter())
		before := apimeta.FindStatusCondition(st.Conditions, sreconcile.StalledCondition)
		if before != nil {
			before = before.DeepCopy()
		}
		if sreconcile.Summarize(&st.Conditions, s.stack.Generation, res, err) {
			st.ObservedGeneration = s.stack.Generation
			st.ObservedReconcileRequest = reconcileRequest(s.stack)
		} else if sreconcile.Reason(err) == pulumiv1.ChangeHeldReason {
			// A held change is decided for this generation, as a stall
			// is: it waits for a person. Health checks that compare
			// generations (Argo CD's built-in one) then show why.
			st.ObservedGeneration = s.stack.Generation
		}
		if sreconcile.NewlyStalled(before, st.Conditions) {
			s.warn(sreconcile.Reason(err), err.Error())
		}
	}
	result, err := sreconcile.ComputeResult(res, err, sreconcile.Schedule{Interval: s.decision.RequeueAfter,
		Pacer: &s.r.pace, Object: client.ObjectKeyFromObject(s.stack)})
	if err == nil {
		result.RequeueAfter = s.untilExpiry(result.RequeueAfter)
	}
	recorded := s.stack.Status.Workspace != nil
	if perr := s.patcher.Patch(ctx, s.stack); perr != nil {
		return ctrl.Result{}, errors.Join(err, perr)
	}
	if s.started && !s.patcher.Gone() {
		if derr := s.dropUnrecorded(ctx); derr != nil {
			return ctrl.Result{}, errors.Join(err, derr)
		}
	}
	if recorded && !s.patcher.Gone() {
		// The API server drops the record when its Stack schema is older
		// than this operator, and keeps it once the schema is upgraded.
		s.r.recordsDropped.Store(s.stack.Status.Workspace == nil)
	}
	return result, err
}

// reportLastUpdate ends a reconcile in which no update was started: the
// Stack is as its last update left it. A conflict with another update of
// the stack (retryOnUpdateConflict off) or too many failures in a row stall
// it, still polling its source, since a new revision lifts the stall; a
// failure under its retry cooldown is a wait; otherwise it is Ready and
// looked at again when the decision says.
func (s *session) reportLastUpdate(context.Context) (sreconcile.Result, error) {
	st := &s.stack.Status
	switch {
	case conflictStalled(s.stack):
		return sreconcile.ResultEmpty, sreconcile.NewStallingRequeue(pulumiv1.StalledConflictReason,
			fmt.Errorf("%s could not start: another update of the stack was running; set spec.retryOnUpdateConflict to retry such updates", st.LastUpdate.Name),
			ResyncInterval(&s.stack.Spec, s.r.MinResync))
	case s.decision.Stalled:
		reason := pulumiv1.UpdateFailedReason
		if s.stack.Spec.Preview {
			reason = pulumiv1.PreviewFailedReason
		}
		return sreconcile.ResultEmpty, sreconcile.NewStallingRequeue(reason,
			fmt.Errorf("%d updates failed in a row; fix the program, its spec or its source, or request a reconcile: %s", st.LastUpdate.Failures, st.LastUpdate.Message),
			s.decision.RequeueAfter)
	case st.LastUpdate != nil && st.LastUpdate.State == shared.FailedStackStateMessage:
		return sreconcile.ResultEmpty, sreconcile.NewWaiting(pulumiv1.ReconcilingRetryReason,
			fmt.Errorf("%s failed; retrying in %s: %s", st.LastUpdate.Name, s.decision.RetryAfter.Round(time.Second), st.LastUpdate.Message),
			s.decision.RequeueAfter)
	default:
		return sreconcile.ResultSuccess, nil
	}
}

// conflictStalled reports whether the last update failed on a conflict with
// another update of the same stack while spec.retryOnUpdateConflict is off,
// and nothing changed since: upstream's UpdateConflict stall.
func conflictStalled(stack *pulumiv1.Stack) bool {
	st := &stack.Status
	if stack.Spec.RetryOnUpdateConflict || st.LastUpdate == nil || st.LastUpdate.State != shared.FailedStackStateMessage || len(st.History) == 0 {
		return false
	}
	return st.History[0].Reason == autov1alpha1.UpdateReasonConflict &&
		st.LastUpdate.Generation == stack.Generation && st.LastUpdate.ReconcileRequest == reconcileRequest(stack)
}

// failed types the failure of one of the operator's own calls (what, e.g.
// "applying the Workspace") with the reason that says which: it is
// retried with backoff and shows in the Stack's Reconciling condition, and
// stalls once it has lasted longer than the stall bound.
func failed(reason, what string, err error) error {
	return sreconcile.NewGeneric(reason, fmt.Errorf("%s: %w", what, err))
}

// stallAfter is the stall bound: how long the same failure may last.
func (r *Reconciler) stallAfter() time.Duration {
	return cmp.Or(r.StallAfter, sreconcile.DefaultStallAfter)
}
