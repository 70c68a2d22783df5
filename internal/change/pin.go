package change

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/agent/readset"
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
	digest, _, err := currentPin(ctx, r, stack, plan)
	return digest, err
}

// currentPin is CurrentPinDigest, with the versions of the Secrets and
// ConfigMaps it digested.
func currentPin(ctx context.Context, r client.Reader, stack *pulumiv1.Stack, plan string) (string, readset.Set, error) {
	list, err := StackInputs(ctx, r, stack)
	if err != nil {
		return "", nil, err
	}
	inputs, err := Digest(list)
	if err != nil {
		return "", nil, err
	}
	var sec corev1.Secret
	var planDigest string
	switch err := r.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: plan}, &sec); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return "", nil, fmt.Errorf("reading the plan Secret %s: %w", plan, err)
	default:
		planDigest = PlanDigest(&sec)
	}
	digest, err := PinDigest(inputs, planDigest)
	return digest, Reads(list), err
}
