package promotion

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// ReasonPinFailed is the reason of a failed attempt to pin a Stack, retried
// with backoff.
const ReasonPinFailed = "PinFailed"

// pinStacks sets spec.commit of each Stack of a Running promotion to the
// release's commit, with the annotations that hold its up to the plan its
// preview saved, unless they are there already. A Stack that disappeared,
// or that someone made unpinnable since the promotion started, fails the
// promotion; so does a pin the API server refuses as invalid or forbidden.
func (s *session) pinStacks(ctx context.Context) (sreconcile.Result, error) {
	if !s.running() {
		return sreconcile.ResultEmpty, nil
	}
	for _, ps := range s.p.Status.Stacks {
		stack, err := get(ctx, s.r.Client, s.p.Namespace, "Stack", ps.Name, &pulumiv1.Stack{})
		if err != nil {
			return sreconcile.ResultEmpty, err
		}
		if err := pinnable(ps.Name, stack); err != nil {
			s.outcome, s.message = promotionv1alpha1.PromotionFailed, err.Error()
			return sreconcile.ResultEmpty, nil
		}
		plan := s.planOf(ps.Name)
		if stack.Spec.Commit == ps.Commit && pinnedWithPlan(stack.Annotations, plan, ps.Commit) {
			continue
		}
		err = s.r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(PinConfiguration(s.p.Namespace, ps.Name, ps.Commit, plan)),
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

// PinConfiguration is the server-side apply configuration that pins the
// Stack namespace/name to commit: apiVersion, kind, name, namespace and
// spec.commit and, with a plan (the name of the promotion's plan Secret
// for the Stack), the annotations that hold the Stack's next up of commit
// to it (stack.PlanAnnotation, stack.PlanCommitAnnotation); nothing else,
// so that the field manager FieldManager owns those fields only. Setting
// them in one apply means no up of commit can start without its plan.
func PinConfiguration(namespace, name, commit, plan string) *unstructured.Unstructured {
	metadata := map[string]any{"name": name, "namespace": namespace}
	if a := planAnnotations(plan, commit); a != nil {
		metadata["annotations"] = a
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": pulumiv1.GroupVersion.String(),
		"kind":       "Stack",
		"metadata":   metadata,
		"spec":       map[string]any{"commit": commit},
	}}
}
