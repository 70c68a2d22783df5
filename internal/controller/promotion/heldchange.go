package promotion

import (
	"context"
	"fmt"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// ReasonHeldChangeDeciding is the reason of the wait of a held change's
// promotion whose Stack has not decided on its new spec yet.
const ReasonHeldChangeDeciding = "HeldChangeChanging"

// targets are the Stacks of the stage the promotion previews and pins:
// every Stack the stage deploys (change.Members: named, or selected and
// consenting), or, for a held change, the Stack that holds it, if it is
// one of them.
func (s *session) targets() []promotionv1alpha1.StackBinding {
	held := s.p.Spec.HeldChange
	if held == nil {
		return s.members.Bindings
	}
	for _, b := range s.members.Bindings {
		if b.Name == held.Stack {
			return []promotionv1alpha1.StackBinding{b}
		}
	}
	return nil
}

// reconcileHeldChange keeps a promotion of a held change (spec.heldChange)
// to the change it was asked for, until it pins the Stack: it is aborted
// as Superseded once the Stack holds a newer change, and as Withdrawn once
// it holds none (its spec was reverted, or approved otherwise). A Stack
// the stage does not list, or that does not name the stage, aborts it,
// as does a release other than the one the stage runs.
// Once it has pinned the Stack, the Stack's own hold takes over: it
// deploys only what this promotion previewed.
func (s *session) reconcileHeldChange(ctx context.Context) (sreconcile.Result, error) {
	held := s.p.Spec.HeldChange
	if held == nil || !s.pending() {
		return sreconcile.ResultEmpty, nil
	}
	if len(s.targets()) == 0 {
		return s.abort("spec.heldChange.stack: stage %s does not deploy Stack %s", s.p.Spec.Stage, held.Stack)
	}
	// Whoever may ask for promotions may write spec.heldChange: what the
	// stage runs is read from its status, which only the operator writes,
	// so that a held change's promotion cannot carry another release to
	// one Stack of the stage and leave the others behind.
	if cur := s.stage.Status.CurrentRelease; cur == nil || cur.Name != s.p.Spec.Release {
		return s.abort("spec.release: a promotion of a held change deploys the release stage %s runs, not %s", s.p.Spec.Stage, s.p.Spec.Release)
	}
	stack, err := get(ctx, s.r.APIReader, s.p.Namespace, "Stack", held.Stack, &pulumiv1.Stack{})
	switch {
	case err != nil:
		return sreconcile.ResultEmpty, err
	case stack == nil:
		return s.abort("spec.heldChange.stack: Stack %s no longer exists", held.Stack)
	case change.AuthorizedStage(stack.Annotations) != s.p.Spec.Stage:
		return s.abort("spec.heldChange.stack: Stack %s is not governed by stage %s", held.Stack, s.p.Spec.Stage)
	}
	now, err := change.SpecDigest(stack)
	if err != nil {
		return sreconcile.ResultEmpty, sreconcile.NewGeneric("", err)
	}
	switch h := stack.Status.HeldSpec; {
	case now == held.Digest:
		return sreconcile.ResultEmpty, nil
	case h == nil || h.Digest != now:
		if a := stack.Status.ApprovedSpec; a != nil && a.Digest == now {
			s.p.Status.EndReason = promotionv1alpha1.EndReasonWithdrawn
			return s.abort("spec.heldChange: Stack %s no longer holds the change: its spec is one approved for it (generation %d)", held.Stack, a.Generation)
		}
		// The Stack has not decided on its new spec yet.
		return sreconcile.ResultEmpty, sreconcile.NewWaiting(ReasonHeldChangeDeciding,
			fmt.Errorf("spec.heldChange: waiting for Stack %s to decide on its spec (generation %d)", held.Stack, stack.Generation), busyWait)
	default:
		s.p.Status.EndReason = promotionv1alpha1.EndReasonSuperseded
		return s.abort("spec.heldChange: Stack %s holds a newer change (generation %d), which a promotion of its own previews", held.Stack, h.Generation)
	}
}

// heldChangeEditor is who made the change a promotion of a held change
// deploys, as the Stack recorded it (status.heldSpec.editedBy, from the
// operator's admission webhook): known is false when the Stack does not
// know, or for a promotion of a release.
func (s *session) heldChangeEditor(ctx context.Context) (editor string, known bool, err error) {
	held := s.p.Spec.HeldChange
	if held == nil {
		return "", false, nil
	}
	stack, err := get(ctx, s.r.APIReader, s.p.Namespace, "Stack", held.Stack, &pulumiv1.Stack{})
	if err != nil || stack == nil || stack.Status.HeldSpec == nil || stack.Status.HeldSpec.Digest != held.Digest {
		return "", false, err
	}
	return stack.Status.HeldSpec.EditedBy, stack.Status.HeldSpec.EditedBy != "", nil
}
