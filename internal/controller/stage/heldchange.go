package stage

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// EventHeldChange is the reason of the event that records a promotion the
// stage asked for to deploy a change held on one of its Stacks.
const EventHeldChange = "HeldChange"

// reconcileHeldChanges asks, when nothing else is promoted into the stage
// and it is not frozen,
// for the promotion of a change held on one of its Stacks (the Stack's
// status.heldSpec): the release the stage runs, with the held spec, under
// a name derived from the Stack and the change (change.HeldChangeName), so that
// each change is asked for once. A change whose promotion has ended
// (rejected, failed, aborted) is not asked for again: the Stack keeps
// what it runs until its spec changes again or is reverted. A stage that
// runs no release yet leaves the change to its first promotion.
func (s *session) reconcileHeldChanges(ctx context.Context) (sreconcile.Result, error) {
	if s.active != nil || s.pick != nil || s.stage.Spec.Freeze != nil {
		return sreconcile.ResultEmpty, nil
	}
	names := make([]string, 0, len(s.stacks))
	for name := range s.stacks {
		names = append(names, name)
	}
	sort.Strings(names)
	st := &s.stage.Status
	for _, name := range names {
		stack := s.stacks[name]
		held := stack.Status.HeldSpec
		if held == nil || held.Generation != stack.Generation || change.AuthorizedStage(stack.Annotations) != s.stage.Name {
			continue
		}
		if st.CurrentRelease != nil && st.CurrentRelease.Name != s.storedRelease {
			// The stage has only now taken this release: a held change's
			// promotion asked for before the status says so would read
			// the stage's stored status, find another release, and be
			// aborted as naming a release the stage does not run. The
			// next pass, once the status is stored, asks for it.
			return sreconcile.ResultRequeue, nil
		}
		if st.CurrentRelease == nil {
			st.WaitingFor = fmt.Sprintf("Stack %s holds a change; the stage runs no release yet, so its first promotion deploys it", name)
			continue
		}
		pname := change.HeldChangeName(s.stage.Name, name, held.Digest)
		if p := s.promotions[pname]; p != nil {
			if p.Status.Phase.IsFinished() {
				st.WaitingFor = fmt.Sprintf("the change held on Stack %s: promotion %s was %s (%s); change or revert the Stack's spec",
					name, pname, p.Status.Phase, p.Status.Message)
				continue
			}
			return sreconcile.ResultEmpty, nil
		}
		p := s.newPromotion(pname, st.CurrentRelease.Name, fmt.Sprintf("the change held on Stack %s (generation %d)", name, held.Generation))
		p.Spec.HeldChange = &promotionv1alpha1.HeldChangeRef{Stack: name, Digest: held.Digest}
		err := s.r.Client.Create(ctx, p)
		switch {
		case apierrors.IsAlreadyExists(err):
		case err != nil:
			return sreconcile.ResultEmpty, sreconcile.NewGeneric("", fmt.Errorf("creating promotion %s of the change held on Stack %s: %w", pname, name, err))
		default:
			s.event(p, corev1.EventTypeNormal, EventHeldChange, fmt.Sprintf("asked for promotion %s of the change held on Stack %s (generation %d)",
				pname, name, held.Generation))
		}
		st.WaitingFor = fmt.Sprintf("promotion %s of the change held on Stack %s pending", pname, name)
		return sreconcile.ResultSuccess, nil
	}
	return sreconcile.ResultEmpty, nil
}
