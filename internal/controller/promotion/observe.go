package promotion

import (
	"context"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// ReasonDeploying is the reason of the wait of a promotion whose Stacks
// are deploying the release.
const ReasonDeploying = "Deploying"

// deployWait is how long a Running promotion waits before it looks at its
// Stacks again by itself; their changes wake it sooner.
const deployWait = time.Minute

// StackState is where one Stack is in a promotion to a commit.
type StackState int

const (
	// StackDeploying: the Stack has not finished with the commit yet.
	StackDeploying StackState = iota
	// StackDeployed: the Stack is Ready at the commit.
	StackDeployed
	// StackFailed: the Stack is Stalled, or an update of the commit failed.
	StackFailed
)

// Observe says where stack is in its promotion to commit, with a message:
// deployed once it is Ready, its generation handled, and its last
// successful update at commit; failed when it is Stalled for its
// generation, or its update of commit for its generation failed for a
// reason the Stack counts (an interrupted update is run again, and waited
// for). What happened before the pin (another generation) does not count.
// With a request (the reconcile request the pin set, PinRequest), what
// the Stack did before it handled that request does not count either: a
// pin that changes only the plan annotations leaves the generation as it
// was, and a stall or failure of the previous promotion is not this one's.
func Observe(stack *pulumiv1.Stack, commit, request string) (StackState, string) {
	st := &stack.Status
	if stack.Spec.Commit != commit {
		return StackDeploying, "waiting for the pin to be seen"
	}
	handled := request == "" || st.ObservedReconcileRequest == request
	ranFor := func(lu *shared.StackUpdateState) bool {
		return lu.Generation == stack.Generation && (request == "" || lu.ReconcileRequest == request)
	}
	if c := apimeta.FindStatusCondition(st.Conditions, sreconcile.StalledCondition); c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == stack.Generation && handled {
		return StackFailed, "stalled: " + c.Message
	}
	if lu := st.LastUpdate; lu != nil && lu.State == shared.FailedStackStateMessage && lu.LastAttemptedCommit == commit && ranFor(lu) {
		if reason := historyReason(stack, lu.Name); stack.FailureNotCounted(reason) {
			// The operator stopped under it, or it met a conflict the
			// Stack retries: not the release's failure.
			return StackDeploying, fmt.Sprintf("update %s ended %s; the Stack runs it again", lu.Name, reason)
		}
		return StackFailed, fmt.Sprintf("update %s failed: %s", lu.Name, lu.Message)
	}
	if lu := st.LastUpdate; sreconcile.IsReady(st.Conditions) && st.ObservedGeneration == stack.Generation && handled &&
		lu != nil && lu.LastSuccessfulCommit == commit && ranFor(lu) {
		return StackDeployed, lu.Message
	}
	if c := apimeta.FindStatusCondition(st.Conditions, sreconcile.ReconcilingCondition); c != nil && c.Status == metav1.ConditionTrue {
		return StackDeploying, c.Message
	}
	if !handled {
		return StackDeploying, "waiting for the operator to handle the promotion's reconcile request"
	}
	return StackDeploying, fmt.Sprintf("waiting for the operator to handle generation %d", stack.Generation)
}

// stalledFor reports whether stack is Stalled for reason.
func stalledFor(stack *pulumiv1.Stack, reason string) bool {
	c := apimeta.FindStatusCondition(stack.Status.Conditions, sreconcile.StalledCondition)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason
}

// heldSince says why a Stack a promotion pinned cannot deploy it: its
// spec changed after the promotion started, and the Stack holds that
// change (status.heldSpec) for a promotion of its own, running nothing
// of it; "" otherwise. A change held before the promotion started is
// what the promotion previewed and deploys.
func heldSince(stack *pulumiv1.Stack, start *metav1.Time) string {
	h := stack.Status.HeldSpec
	if h == nil || h.Generation != stack.Generation || start == nil || h.Since.Before(start) {
		return ""
	}
	return fmt.Sprintf("its spec changed after the promotion started (generation %d), and the Stack holds the change for a promotion of its own; "+
		"nothing of it ran", h.Generation)
}

// historyReason is the reason the Stack's history records for its Update
// name, or "" when the history does not hold it.
func historyReason(stack *pulumiv1.Stack, name string) string {
	for _, h := range stack.Status.History {
		if h.Name == name {
			return h.Reason
		}
	}
	return ""
}

// observeStacks follows the Stacks a Running promotion pinned: it records
// each one's state (Updating, Succeeded, Failed), and its Update and
// message as it ends. Without a rollout on the stage the first Stack that
// failed fails the promotion, as do a Stack deleted and a change held
// since the promotion started; with one, each is a failed Stack, which
// the failure budget counts (advanceRollout). A failed Stack that later
// deploys (the Stack's own retry) counts as succeeded. What it waits for
// is left in s.waiting, and how many failures are the release's own (an
// update of it failed) in s.releaseFaults, for advanceRollout.
func (s *session) observeStacks(ctx context.Context) (sreconcile.Result, error) {
	if !s.running() || s.outcome != "" {
		return sreconcile.ResultEmpty, nil
	}
	budgeted := s.recordedRollout() != nil
	fail := func(ps *promotionv1alpha1.PromotedStack, msg string, releaseFailed bool) bool {
		ps.State, ps.Message = promotionv1alpha1.StackFailed, sreconcile.Truncate(msg, maxStackMessage)
		if releaseFailed {
			s.releaseFaults++
		}
		if budgeted {
			return false
		}
		s.outcome, s.message, s.releaseFailed = promotionv1alpha1.PromotionFailed, fmt.Sprintf("Stack %s: %s", ps.Name, msg), releaseFailed
		return true
	}
	for i := range s.p.Status.Stacks {
		ps := &s.p.Status.Stacks[i]
		if !pinned(ps) {
			continue
		}
		stack, err := get(ctx, s.r.Client, s.p.Namespace, "Stack", ps.Name, &pulumiv1.Stack{})
		if err != nil {
			return sreconcile.ResultEmpty, err
		}
		if stack == nil {
			if fail(ps, "the Stack was deleted", false) {
				s.message = fmt.Sprintf("Stack %q was deleted", ps.Name)
				return sreconcile.ResultEmpty, nil
			}
			continue
		}
		if msg := heldSince(stack, s.p.Status.StartTime); msg != "" {
			// Nothing of the change ran, and nothing will until a
			// promotion of its own approves it: not the release's fault.
			if fail(ps, msg, false) {
				return sreconcile.ResultEmpty, nil
			}
			continue
		}
		state, msg := Observe(stack, ps.Commit, PinRequest(s.p))
		if state != StackDeploying && stack.Status.LastUpdate != nil {
			ps.Update, ps.Message = stack.Status.LastUpdate.Name, sreconcile.Truncate(msg, maxStackMessage)
		}
		switch state {
		case StackFailed:
			releaseFailed, violation := true, violatesPlan(msg)
			switch {
			case violation:
				// Not the release's fault: a new promotion may take it.
				msg, releaseFailed = planViolation(ps.Name, msg), false
			case stalledFor(stack, pulumiv1.StalledInputsChangedReason):
				// Nothing ran; not the release's fault either.
				releaseFailed = false
			}
			if fail(ps, msg, releaseFailed) {
				if violation {
					s.message = msg
				}
				return sreconcile.ResultEmpty, nil
			}
		case StackDeployed:
			ps.State = promotionv1alpha1.StackSucceeded
		default:
			if ps.State != promotionv1alpha1.StackFailed {
				ps.State = promotionv1alpha1.StackUpdating
			}
			if s.waiting == "" {
				s.waiting = fmt.Sprintf("waiting for Stack %s: %s", ps.Name, msg)
			}
		}
	}
	return sreconcile.ResultEmpty, nil
}
