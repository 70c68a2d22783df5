package stage

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// reconcileHealth works out which Stacks the stage deploys (those it
// names and those its selector matches that consent, change.Members),
// records how many and which matched without consent, reads them, and
// sums up their kstatus conditions in status.health. An invalid selector,
// or more Stacks than a promotion can record, stalls the stage; a stage
// that deploys no Stack, or that no longer selects a Stack bound to it
// (Membership.Problem), waits, and stalls if that lasts.
func (s *session) reconcileHealth(ctx context.Context) (sreconcile.Result, error) {
	st := &s.stage.Status
	st.StackCount, st.UnconsentedStackCount, st.UnconsentedStacks = 0, 0, nil
	members, err := change.ListMembers(ctx, s.r.Client, s.stage)
	if err != nil {
		if _, selErr := change.StackSelector(s.stage); selErr != nil {
			return sreconcile.ResultEmpty, sreconcile.NewStalling(sreconcile.StalledSpecInvalidReason, selErr)
		}
		return sreconcile.ResultEmpty, sreconcile.NewGeneric("", err)
	}
	s.members = members
	st.StackCount = int32(len(members.Bindings))               //nolint:gosec // bounded by the Stacks of one namespace
	st.UnconsentedStackCount = int32(len(members.Unconsented)) //nolint:gosec // likewise
	st.UnconsentedStacks = members.Unconsented[:min(len(members.Unconsented), maxListedUnconsented)]
	if err := tooManyStacks(len(members.Bindings)); err != nil {
		return sreconcile.ResultEmpty, err
	}
	if problem := members.Problem(s.stage.Name); problem != "" {
		return sreconcile.ResultEmpty, sreconcile.NewMissing(promotionv1alpha1.StageReasonStacksUnselected, errors.New(problem))
	}
	s.stacks, s.stackErrs = map[string]*pulumiv1.Stack{}, map[string]error{}
	for _, b := range members.Bindings {
		var stack pulumiv1.Stack
		err := s.r.Client.Get(ctx, client.ObjectKey{Namespace: s.stage.Namespace, Name: b.Name}, &stack)
		switch {
		case err == nil:
			s.stacks[b.Name] = &stack
		case apierrors.IsNotFound(err):
			s.stackErrs[b.Name] = err
		default:
			return sreconcile.ResultEmpty, sreconcile.NewGeneric("", fmt.Errorf("reading Stack %q: %w", b.Name, err))
		}
	}
	h := change.Health(members.Bindings, s.stacks)
	s.stage.Status.Health = &h
	return sreconcile.ResultEmpty, nil
}

// maxListedUnconsented is how many Stacks status.unconsentedStacks names
// (its MaxItems).
const maxListedUnconsented = 20

// tooManyStacks is the stall of a stage that deploys n Stacks, more than
// a promotion records (change.MaxMembers); nil for n within the limit.
func tooManyStacks(n int) error {
	if n <= change.MaxMembers {
		return nil
	}
	return sreconcile.NewStalling(promotionv1alpha1.StageReasonTooManyStacks, fmt.Errorf(
		"spec.stacks and spec.stackSelector: the stage deploys %d Stacks, more than the %d a promotion records; name or select fewer",
		n, change.MaxMembers))
}
