package promotion

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// ReasonPinFailed is the reason of a failed attempt to pin a Stack, retried
// with backoff.
const ReasonPinFailed = "PinFailed"

// pinStacks sets spec.commit of each Stack a Running promotion's rollout
// has reached (advanceRollout) to the release's commit, with the annotations that hold its up to the plan its
// preview saved, unless they are there already. A Stack that disappeared,
// or that someone made unpinnable since the promotion started, fails the
// promotion; so does a pin the API server refuses as invalid or forbidden.
func (s *session) pinStacks(ctx context.Context) (sreconcile.Result, error) {
	if !s.running() {
		return sreconcile.ResultEmpty, nil
	}
	for _, ps := range s.p.Status.Stacks {
		if s.outcome != "" {
			break
		}
		if ps.State != promotionv1alpha1.StackUpdating && ps.State != "" {
			// Not reached yet, or finished: a Stack that finished keeps
			// its pin, and observeStacks sees it if someone moves it.
			continue
		}
		stack, err := get(ctx, s.r.Client, s.p.Namespace, "Stack", ps.Name, &pulumiv1.Stack{})
		if err != nil {
			return sreconcile.ResultEmpty, err
		}
		if err := pinnable(ps.Name, stack); err != nil {
			s.outcome, s.message = promotionv1alpha1.PromotionFailed, err.Error()
			return sreconcile.ResultEmpty, nil
		}
		request := PinRequest(s.p)
		if stack.Spec.Commit == ps.Commit && stack.Annotations[change.PlanAnnotation] != "" && stack.Annotations[change.PlanCommitAnnotation] == ps.Commit &&
			(stack.Annotations[shared.ReconcileRequestAnnotation] == request || stack.Status.ObservedReconcileRequest == request) {
			// Pinned by this promotion, with a plan: the one apply that
			// pins sets both, and only a promotion or a governor changes
			// them (a plan changed since is the choke point's to refuse).
			continue
		}
		plan, inputs, err := s.pinOf(ctx, ps.Name)
		var generic *sreconcile.Generic
		switch {
		case errors.As(err, &generic):
			return sreconcile.ResultEmpty, err
		case err != nil:
			s.outcome, s.message = promotionv1alpha1.PromotionFailed, err.Error()
			return sreconcile.ResultEmpty, nil
		}
		err = s.r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(PinConfiguration(s.p.Namespace, ps.Name, ps.Commit, plan, inputs, request)),
			client.FieldOwner(FieldManager), client.ForceOwnership)
		switch {
		case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
			s.outcome, s.message = promotionv1alpha1.PromotionFailed, fmt.Sprintf("pinning Stack %q to %s: %v", ps.Name, ps.Commit, err)
			return sreconcile.ResultEmpty, nil
		case err != nil:
			return sreconcile.ResultEmpty, sreconcile.NewGeneric(ReasonPinFailed, fmt.Errorf("pinning Stack %q to %s: %w", ps.Name, ps.Commit, err))
		}
	}
	return sreconcile.ResultEmpty, nil
}

// PinRequest is the reconcile request with which promotion p pins its
// Stacks (change.PinRequest).
func PinRequest(p *promotionv1alpha1.Promotion) string {
	return change.PinRequest(p.Name, string(p.UID))
}

// PinConfiguration is the server-side apply configuration that pins the
// Stack namespace/name to commit: apiVersion, kind, name, namespace and
// spec.commit; with a plan (the name of the promotion's plan Secret for
// the Stack), the annotations that hold the Stack's next up of commit to
// it (change.PlanAnnotation, change.PlanCommitAnnotation) and, with
// inputs, to the inputs it was previewed with (change.InputsAnnotation);
// and, with a
// request, the reconcile request that makes the Stack run that up even
// when nothing else changes (promoting the same release again, after a
// failure that stalled the Stack). Nothing else, so that the field manager
// FieldManager owns those fields only. Setting them in one apply means no
// up of commit can start without its plan.
func PinConfiguration(namespace, name, commit, plan, inputs, request string) *unstructured.Unstructured {
	metadata := map[string]any{"name": name, "namespace": namespace}
	annotations := planAnnotations(plan, commit, inputs)
	if request != "" {
		if annotations == nil {
			annotations = map[string]any{}
		}
		annotations[shared.ReconcileRequestAnnotation] = request
	}
	if annotations != nil {
		metadata["annotations"] = annotations
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": pulumiv1.GroupVersion.String(),
		"kind":       "Stack",
		"metadata":   metadata,
		"spec":       map[string]any{"commit": commit},
	}}
}
