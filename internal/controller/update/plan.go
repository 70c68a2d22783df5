package update

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
)

// Update plans (stackyard extensions of the Update API): a preview with
// spec.savePlan saves the plan it computes in a Secret; an up with
// spec.planSecret is held to the plan such a Secret holds. The plan travels
// to and from the agent as bytes (PreviewRequest.save_plan, Result.plan,
// UpRequest.plan). Its secret values are ciphertext of the stack's secrets
// provider, the others clear text: a Secret is where it belongs.
//
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create

// planSuffix ends the name of the Secret holding a preview's saved plan.
const planSuffix = "-plan"

// PlanSecretName returns the name of the Secret holding the plan that the
// preview Update named update saved: "<update>-plan", shortened as
// OutputsSecretName is when it would be too long.
func PlanSecretName(update string) string { return suffixed(update, planSuffix) }

// savesPlan reports whether obj is a preview that saves its plan.
func savesPlan(obj *autov1alpha1.Update) bool {
	return obj.Spec.Type == autov1alpha1.PreviewType && ptr.Deref(obj.Spec.SavePlan, false)
}

// ensurePlanSecret creates the immutable Secret, owned by obj, holding the
// plan o's preview saved, and its value diff, and returns its name; "" when there is none. A
// failure retrying cannot fix is returned as note.
func (r *Reconciler) ensurePlanSecret(ctx context.Context, obj *autov1alpha1.Update, o *outcome) (name, note string, err error) {
	if len(o.plan) == 0 {
		if savesPlan(obj) && !o.failed() {
			return "", "the plan was not recorded: the agent returned none", nil
		}
		return "", "", nil
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: PlanSecretName(obj.Name), Namespace: obj.Namespace},
		Immutable:  ptr.To(true),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{autov1alpha1.PlanKey: o.plan},
	}
	if len(o.diff) > 0 {
		s.Data[autov1alpha1.DiffKey] = o.diff
	}
	if err := controllerutil.SetControllerReference(obj, s, r.Scheme); err != nil {
		return "", "", fmt.Errorf("owning the plan Secret: %w", err)
	}
	return r.createOwnedSecret(ctx, obj, s, "the plan was")
}

// readPlan returns the plan an up is held to (spec.planSecret), nil when
// it names none. A Secret or key that does not exist is a failure of the
// Update, returned as failure; err is a read that may be retried.
func (r *Reconciler) readPlan(ctx context.Context, obj *autov1alpha1.Update) (plan []byte, failure string, err error) {
	name := obj.Spec.PlanSecret
	if obj.Spec.Type != autov1alpha1.UpType || name == "" {
		return nil, "", nil
	}
	s := &corev1.Secret{}
	err = r.APIReader.Get(ctx, types.NamespacedName{Namespace: obj.Namespace, Name: name}, s)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Sprintf("spec.planSecret: Secret %q not found; the update was not run", name), nil
	case err != nil:
		return nil, "", fmt.Errorf("reading the plan Secret %s: %w", name, err)
	case len(s.Data[autov1alpha1.PlanKey]) == 0:
		return nil, fmt.Sprintf("spec.planSecret: Secret %q has no key %q; the update was not run", name, autov1alpha1.PlanKey), nil
	}
	return s.Data[autov1alpha1.PlanKey], "", nil
}
