package change

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// PromotionEnded says how the promotion namespace/name with uid has ended
// ("has ended Failed", "no longer exists"), or "" while it runs. A read
// that fails counts as running: the caller checks the rest of the pin, and
// a finished promotion is seen at the next attempt.
func PromotionEnded(ctx context.Context, r client.Reader, namespace, name, uid string) string {
	var p promotionv1alpha1.Promotion
	err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &p)
	switch {
	case apierrors.IsNotFound(err):
		return "no longer exists"
	case err != nil:
		return ""
	case string(p.UID) != uid:
		return "no longer exists (another promotion has its name)"
	case p.Status.Phase.IsFinished():
		return "has ended " + string(p.Status.Phase)
	}
	return ""
}

// CurrentPinDigest is PinDigest of what the Stack reads now (StackDigest)
// and of its plan Secret, named plan, now: what the Stack's annotation
// InputsAnnotation, and the preview its promotion recorded, must match.
func CurrentPinDigest(ctx context.Context, r client.Reader, stack *pulumiv1.Stack, plan string) (string, error) {
	inputs, err := StackDigest(ctx, r, stack)
	if err != nil {
		return "", err
	}
	var sec corev1.Secret
	var planDigest string
	switch err := r.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: plan}, &sec); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return "", fmt.Errorf("reading the plan Secret %s: %w", plan, err)
	default:
		planDigest = PlanDigest(&sec)
	}
	return PinDigest(inputs, planDigest)
}
