package alert

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// +kubebuilder:rbac:groups=notification.stackyard.dev,resources=alerts,verbs=get;list;watch
// +kubebuilder:rbac:groups=notification.stackyard.dev,resources=alerts/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=notification.stackyard.dev,resources=providers,verbs=get;list;watch
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=promotions;releases;stages;pipelines,verbs=get;list;watch
// +kubebuilder:rbac:groups=pulumi.com,resources=stacks,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// SetupWithManager registers the reconciler with mgr: an Alert is
// reconciled on creation, on a new generation, and whenever a Promotion,
// Release, Stack or Provider of its namespace changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toAlerts := handler.EnqueueRequestsFromMapFunc(r.namespaceAlerts)
	return ctrl.NewControllerManagedBy(mgr).
		For(&notificationv1alpha1.Alert{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&promotionv1alpha1.Promotion{}, toAlerts).
		Watches(&promotionv1alpha1.Release{}, toAlerts).
		Watches(&pulumiv1.Stack{}, toAlerts).
		Watches(&notificationv1alpha1.Provider{}, toAlerts).
		Named("alert").
		Complete(r)
}

// namespaceAlerts maps an object to the Alerts of its namespace: an Alert
// never looks at another namespace.
func (r *Reconciler) namespaceAlerts(ctx context.Context, obj client.Object) []reconcile.Request {
	var alerts notificationv1alpha1.AlertList
	if err := r.Client.List(ctx, &alerts, client.InNamespace(obj.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the Alerts of a namespace", "namespace", obj.GetNamespace())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(alerts.Items))
	for _, a := range alerts.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&a)})
	}
	return reqs
}
