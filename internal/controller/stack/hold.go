package stack

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// Events of held changes.
const (
	// EventChangeHeld: a new change to a governed Stack's spec is held.
	EventChangeHeld = "ChangeHeld"
	// EventChangeApproved: a promotion approved the held change.
	EventChangeApproved = "ChangeApproved"
	// EventChangeWithdrawn: the spec is the approved one again.
	EventChangeWithdrawn = "ChangeWithdrawn"
)

// reconcileHold keeps a held change from running: when the spec of a
// Stack that a stage governs is not the one approved for it
// (change.ApproveSpec), the Stack records the change (status.heldSpec,
// ChangePending) and waits, before it resolves its source, applies its
// Workspace or starts anything with the change's inputs. Its Workspace and
// its resources stay as it last deployed them. An approved spec is
// recorded (status.approvedSpec), which is what the choke point checks
// before every operation.
func (s *session) reconcileHold(ctx context.Context) (sreconcile.Result, error) {
	return sreconcile.ResultEmpty, s.hold(ctx)
}

// hold is reconcileHold's decision: nil when the spec is approved, a
// Waiting error (ChangeHeld) when it is held.
func (s *session) hold(ctx context.Context) error {
	d, err := change.ApproveSpec(ctx, s.r.apiReader(), s.stack)
	if err != nil {
		return failed(pulumiv1.ApprovalReadFailedReason, "deciding whether the Stack's spec is approved", err)
	}
	st := &s.stack.Status
	if d.Approval != nil {
		if st.HeldSpec != nil {
			if d.Approval.By == shared.ApprovedPromotion && d.Approval.Digest == st.HeldSpec.Digest {
				s.event(corev1.EventTypeNormal, EventChangeApproved, fmt.Sprintf("promotion %s previewed and approved the held change (generation %d); deploying it",
					d.Approval.Promotion, st.HeldSpec.Generation))
			} else {
				s.event(corev1.EventTypeNormal, EventChangeWithdrawn, fmt.Sprintf("the held change (generation %d) is withdrawn: the spec is one approved for the Stack",
					st.HeldSpec.Generation))
			}
		}
		st.ApprovedSpec, st.HeldSpec = d.Approval, nil
		apimeta.RemoveStatusCondition(&st.Conditions, pulumiv1.ChangePendingCondition)
		return nil
	}
	held := d.Held
	held.Since = metav1.NewTime(s.now)
	if prev := st.HeldSpec; prev != nil && prev.Digest == held.Digest {
		held.Since = prev.Since
	} else {
		by := "someone the operator's admission webhook did not record"
		if held.EditedBy != "" {
			by = held.EditedBy
		}
		s.event(corev1.EventTypeNormal, EventChangeHeld, fmt.Sprintf("a change to the spec (generation %d), made by %s, is held for a promotion", held.Generation, by))
	}
	st.HeldSpec = held
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: pulumiv1.ChangePendingCondition, Status: metav1.ConditionTrue, Reason: pulumiv1.ChangeHeldReason,
		Message: d.Message, ObservedGeneration: s.stack.Generation,
	})
	return sreconcile.NewWaiting(pulumiv1.ChangeHeldReason, errors.New(d.Message), ResyncInterval(&s.stack.Spec, s.r.MinResync))
}
