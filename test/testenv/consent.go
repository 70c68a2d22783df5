package testenv

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// AuthorizeStacks does, with c, what a governor does to let a stage use
// its Stacks: it annotates each Stack the stage lists, that exists, with
// the stage's name (promotionv1alpha1.AuthorizedStageAnnotation); for a
// preview-only stage, which deploys nothing, it adds the stage to the
// Stack's promotion.stackyard.dev/preview-stages instead, once the Stack
// names the stage that deploys it (an ungoverned Stack needs no consent to
// be previewed, and may not carry one).
func AuthorizeStacks(ctx context.Context, c client.Client, stage *promotionv1alpha1.Stage) error {
	for _, b := range stage.Spec.Stacks {
		stack := &pulumiv1.Stack{}
		err := c.Get(ctx, client.ObjectKey{Namespace: stage.Namespace, Name: b.Name}, stack)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("reading Stack %s: %w", b.Name, err)
		}
		key, value := promotionv1alpha1.AuthorizedStageAnnotation, stage.Name
		if stage.Spec.PreviewOnly {
			if stack.Annotations[promotionv1alpha1.AuthorizedStageAnnotation] == "" {
				continue
			}
			// internal/change's tests import this package: the list
			// is joined here, as a governor would write it.
			stages := stack.Annotations[promotionv1alpha1.PreviewStagesAnnotation]
			key, value = promotionv1alpha1.PreviewStagesAnnotation, strings.TrimPrefix(stages+","+stage.Name, ",")
		}
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, key, value)
		if err := c.Patch(ctx, stack, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("letting Stage %s use Stack %s: %w", stage.Name, b.Name, err)
		}
	}
	return nil
}
