package pullrequest

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=pipelines,verbs=get;list;watch
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=pipelines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=pipelines/finalizers,verbs=update
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=pipelines,verbs=record
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=stages,verbs=get;list;watch
// +kubebuilder:rbac:groups=pulumi.com,resources=stacks,verbs=get;list;watch
// +kubebuilder:rbac:groups=auto.pulumi.com,resources=workspaces;updates,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler with mgr. A Pipeline is
// reconciled when it is created, on a new generation and on a reconcile
// request (a Receiver's wake-up), then every spec.pullRequests.interval;
// the change of a preview Workspace or Update, or of a review stack, it
// owns wakes it too.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&promotionv1alpha1.Pipeline{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			sreconcile.AnnotationChanged(shared.ReconcileRequestAnnotation),
		))).
		Owns(&autov1alpha1.Workspace{}).
		Owns(&autov1alpha1.Update{}).
		Owns(&pulumiv1.Stack{}).
		Named("pullrequest").
		Complete(r)
}
