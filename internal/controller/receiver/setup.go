package receiver

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
)

// +kubebuilder:rbac:groups=notification.stackyard.dev,resources=receivers,verbs=get;list;watch
// +kubebuilder:rbac:groups=notification.stackyard.dev,resources=receivers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// SetupWithManager registers the reconciler with mgr: Receivers are
// reconciled on creation and on a new generation, and every few minutes
// for their Secret.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&notificationv1alpha1.Receiver{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("receiver").
		Complete(r)
}
