package pipeline

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// UnfinishedReleaseIndex indexes the Promotions that have not finished by
// the Release they promote; retention keeps those Releases.
const UnfinishedReleaseIndex = "pipeline.unfinished.spec.release"

// SetupWithManager registers the reconciler with mgr, and the index above. A Pipeline is
// reconciled when it is created, on a new generation and on a reconcile
// request, then every interval; status-only updates (its own) are ignored.
// A change to one of its Releases (a stage starting or stopping to run it)
// wakes it too, so that retention sees it; the deletion of one leaves an
// event on it, whoever deleted it.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	for _, kind := range []string{"Pipeline", "Release", "Promotion"} {
		if !r.Scheme.Recognizes(promotionv1alpha1.GroupVersion.WithKind(kind)) {
			return fmt.Errorf("the scheme does not know %s %s: add api/promotion/v1alpha1 to it", promotionv1alpha1.GroupVersion, kind)
		}
	}
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &promotionv1alpha1.Promotion{}, UnfinishedReleaseIndex, unfinishedRelease)
	if err != nil {
		return fmt.Errorf("indexing promotions by release: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&promotionv1alpha1.Pipeline{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			sreconcile.AnnotationChanged(shared.ReconcileRequestAnnotation),
		))).
		Owns(&promotionv1alpha1.Release{}).
		Watches(&promotionv1alpha1.Release{}, sreconcile.RecordDeletions(r.Recorder, r.releaseDeleted)).
		Named("pipeline").
		Complete(r)
}

// unfinishedRelease is the value of UnfinishedReleaseIndex for a
// Promotion: its Release while it has not finished, nothing after.
func unfinishedRelease(obj client.Object) []string {
	if p, ok := obj.(*promotionv1alpha1.Promotion); ok && !p.Status.Phase.IsFinished() {
		return []string{p.Spec.Release}
	}
	return nil
}
