package pipeline

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/change"
)

// releaseDeleted puts the event of a Release's deletion on its Pipeline,
// unless the Pipeline went first (then its Releases go with it).
func (r *Reconciler) releaseDeleted(ctx context.Context, obj client.Object) (client.Object, string) {
	rel, ok := obj.(*promotionv1alpha1.Release)
	if !ok {
		return nil, ""
	}
	var p promotionv1alpha1.Pipeline
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: rel.Namespace, Name: rel.Spec.Pipeline}, &p); err != nil || !p.DeletionTimestamp.IsZero() {
		return nil, ""
	}
	return &p, fmt.Sprintf("Release %s (commit %s) was deleted", rel.Name, change.ShortCommit(rel.Spec.Commit.SHA))
}
