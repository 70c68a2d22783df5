package program

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// +kubebuilder:rbac:groups=pulumi.com,resources=programs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=pulumi.com,resources=programs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=pulumi.com,resources=programs/finalizers,verbs=update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler with mgr. Programs are
// reconciled on creation, on a new generation, when their deletion starts
// and on a reconcile request; status-only updates (our own) are ignored.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if !r.Scheme.Recognizes(pulumiv1.GroupVersion.WithKind("Program")) {
		return fmt.Errorf("the scheme does not know %s Program: add api/pulumi/v1 to it", pulumiv1.GroupVersion)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&pulumiv1.Program{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			sreconcile.DeletionStarted(),
			sreconcile.AnnotationChanged(pulumiv1.ReconcileRequestAnnotation),
		))).
		Named("program").
		Complete(r)
}
