package promotion

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// promotionDeleted puts the event of a Promotion's deletion on its Stage,
// unless the Stage is gone.
func (r *Reconciler) promotionDeleted(ctx context.Context, obj client.Object) (client.Object, string) {
	p, ok := obj.(*promotionv1alpha1.Promotion)
	if !ok {
		return nil, ""
	}
	var st promotionv1alpha1.Stage
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Spec.Stage}, &st); err != nil || !st.DeletionTimestamp.IsZero() {
		return nil, ""
	}
	phase := p.Status.Phase
	if phase == "" {
		phase = promotionv1alpha1.PromotionPending
	}
	return &st, fmt.Sprintf("Promotion %s (release %s, %s, asked for by %s) was deleted", p.Name, p.Spec.Release, phase, p.Spec.RequestedBy)
}

// approvalDeleted puts the event of an Approval's deletion on its
// Promotion, unless the Promotion is gone.
func (r *Reconciler) approvalDeleted(ctx context.Context, obj client.Object) (client.Object, string) {
	a, ok := obj.(*promotionv1alpha1.Approval)
	if !ok {
		return nil, ""
	}
	var p promotionv1alpha1.Promotion
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: a.Spec.Promotion}, &p); err != nil || !p.DeletionTimestamp.IsZero() {
		return nil, ""
	}
	return &p, fmt.Sprintf("Approval %s (%s by %s) was deleted", a.Name, a.Spec.Decision, a.Spec.User)
}
