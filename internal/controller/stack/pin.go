package stack

import (
	"context"
	"fmt"
	"strings"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/stackrun"
)

// The pin gate reads the promotion that pinned a Stack, and what the Stack
// reads, past the cache.
//
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=promotions,verbs=get
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get

// checkPin decides whether an up held to a promotion's plan may start. It
// may only within the promotion that pinned the Stack: while it runs (a
// failed promotion's plan is not retried behind its record), and while
// what the Stack reads is what that promotion previewed and its approvers
// were shown (change.InputsAnnotation: the whole spec but the commit, the
// Secrets and ConfigMaps it names, and the plan Secret). Otherwise the
// Stack is Stalled, saying why, and nothing runs until a new promotion
// pins it. A pin made before pins carried their inputs passes. An up of a
// governed Stack without a plan is asked of change.UnplannedUp, as the
// choke point will ask it: one that would apply again what the Stack
// deployed, with inputs its promotion did not approve, stalls it
// (Unapproved).
func (s *session) checkPin(ctx context.Context, revision string, typ autov1alpha1.UpdateType) error {
	stack := s.stack
	plan := stackrun.PlanFor(stack, revision)
	if typ != autov1alpha1.UpType {
		return nil
	}
	if plan == "" {
		if change.AuthorizedStage(stack.Annotations) == "" {
			return nil
		}
		// The choke point would refuse it: say so, and make nothing.
		reason, msg, err := change.UnplannedUp(ctx, s.r.apiReader(), stack)
		switch {
		case err != nil:
			return sreconcile.NewGeneric("", fmt.Errorf("deciding whether the Stack's up may run: %w", err))
		case reason != "":
			return sreconcile.NewStalling(pulumiv1.StalledUnapprovedReason, fmt.Errorf("%s; nothing was run", msg))
		}
		return nil
	}
	reader := s.r.apiReader()
	if name, uid, ok := change.ParsePinRequest(reconcileRequest(stack)); ok {
		if ended := change.PromotionEnded(ctx, reader, stack.Namespace, name, uid); ended != "" {
			return sreconcile.NewStalling(pulumiv1.StalledPromotionEndedReason, fmt.Errorf(
				"the Stack is held to the plan of promotion %s for commit %s, which %s; a plan runs only within its promotion, "+
					"so nothing was run: promote a release again to deploy this Stack", name, revision, ended))
		}
	}
	want := stack.Annotations[change.InputsAnnotation]
	if want == "" {
		return nil
	}
	now, err := change.CurrentPinDigest(ctx, reader, stack, plan)
	if err != nil {
		return sreconcile.NewGeneric("", fmt.Errorf("reading what the Stack's pinned up would read: %w", err))
	}
	if now == want {
		return nil
	}
	return sreconcile.NewStalling(pulumiv1.StalledInputsChangedReason, fmt.Errorf(
		"what the Stack reads changed since its promotion previewed it (its spec, or one of %s), so its up would run what nobody approved; "+
			"nothing was run: promote again for a new preview and new approvals", inputsNamed(stack, plan)))
}

// inputsNamed lists what the inputs digest covers besides the spec, for
// the message of a Stack whose inputs changed.
func inputsNamed(stack *pulumiv1.Stack, plan string) string {
	names := []string{"plan Secret " + plan}
	for _, ref := range change.ReferencedObjects(&stack.Spec) {
		names = append(names, ref.Kind+" "+ref.Name)
	}
	return strings.Join(names, ", ")
}
