package testenv

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// AuthorizeStacks does, with c, what a governor does to let a stage deploy
// its Stacks: it annotates each Stack the stage lists, that exists, with
// the stage's name (promotionv1alpha1.AuthorizedStageAnnotation). A
// preview-only stage deploys nothing and needs no consent.
func AuthorizeStacks(ctx context.Context, c client.Client, stage *promotionv1alpha1.Stage) error {
	if stage.Spec.PreviewOnly {
		return nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, promotionv1alpha1.AuthorizedStageAnnotation, stage.Name)
	for _, b := range stage.Spec.Stacks {
		stack := &pulumiv1.Stack{}
		stack.Namespace, stack.Name = stage.Namespace, b.Name
		err := c.Patch(ctx, stack, client.RawPatch(types.MergePatchType, patch))
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("authorizing Stage %s to deploy Stack %s: %w", stage.Name, b.Name, err)
		}
	}
	return nil
}
