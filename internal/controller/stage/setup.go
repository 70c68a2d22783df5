package stage

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// SetupWithManager registers the reconciler and what wakes a Stage: its
// own spec changes and reconcile requests, its Pipeline, the Stacks it
// binds, its pipeline's Releases, its Promotions, its upstream Stages, and
// the Stages that bind a Stack it binds too (the older one may let it go).
// change.SetupIndexes must have run.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("stage").
		For(&promotionv1alpha1.Stage{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			sreconcile.AnnotationChanged(pulumiv1.ReconcileRequestAnnotation),
		))).
		Watches(&promotionv1alpha1.Stage{}, handler.EnqueueRequestsFromMapFunc(r.neighboursOf)).
		Watches(&pulumiv1.Stack{}, handler.EnqueueRequestsFromMapFunc(r.stagesOfStack)).
		Watches(&promotionv1alpha1.Pipeline{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []ctrlreconcile.Request {
			return r.stagesBy(ctx, obj.GetNamespace(), change.PipelineIndex, obj.GetName())
		})).
		Watches(&promotionv1alpha1.Release{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []ctrlreconcile.Request {
			return r.stagesBy(ctx, obj.GetNamespace(), change.PipelineIndex, obj.(*promotionv1alpha1.Release).Spec.Pipeline)
		})).
		Watches(&promotionv1alpha1.Promotion{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []ctrlreconcile.Request {
			return []ctrlreconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.(*promotionv1alpha1.Promotion).Spec.Stage}}}
		})).
		Complete(r)
}

// stagesOfStack maps a Stack to the Stages that name it, those whose
// selector matches its labels, and the one its authorized-stage
// annotation binds it to, which must hear of a bound Stack it does not
// select (change.Membership.Unselected), created so. (On an update the
// handler maps the old object too, so a Stack whose labels no longer
// match still wakes the stage it leaves.)
func (r *Reconciler) stagesOfStack(ctx context.Context, obj client.Object) []ctrlreconcile.Request {
	reqs := r.stagesBy(ctx, obj.GetNamespace(), change.StackIndex, obj.GetName())
	if bound := change.AuthorizedStage(obj.GetAnnotations()); bound != "" {
		reqs = append(reqs, ctrlreconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: bound}})
	}
	var list promotionv1alpha1.StageList
	if err := r.Client.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{change.SelectorIndex: change.HasSelector}); err != nil {
		log.FromContext(ctx).Error(err, "listing the stages that select Stacks")
		return reqs
	}
	for i := range list.Items {
		st := &list.Items[i]
		if sel, err := change.StackSelector(st); err == nil && sel != nil && sel.Matches(labels.Set(obj.GetLabels())) {
			reqs = append(reqs, ctrlreconcile.Request{NamespacedName: types.NamespacedName{Namespace: st.Namespace, Name: st.Name}})
		}
	}
	return reqs
}

// neighboursOf maps a Stage to the Stages it feeds and those that bind one
// of its Stacks.
func (r *Reconciler) neighboursOf(ctx context.Context, obj client.Object) []ctrlreconcile.Request {
	st := obj.(*promotionv1alpha1.Stage)
	reqs := r.stagesBy(ctx, st.Namespace, change.UpstreamIndex, st.Name)
	for _, b := range st.Spec.Stacks {
		reqs = append(reqs, r.stagesBy(ctx, st.Namespace, change.StackIndex, b.Name)...)
	}
	// Its own changes are For's to see.
	return slices.DeleteFunc(reqs, func(req ctrlreconcile.Request) bool { return req.Name == st.Name })
}

// stagesBy lists the Stages of namespace whose index holds value.
func (r *Reconciler) stagesBy(ctx context.Context, namespace, index, value string) []ctrlreconcile.Request {
	var list promotionv1alpha1.StageList
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{index: value}); err != nil {
		log.FromContext(ctx).Error(err, "listing stages", "index", index, "value", value)
		return nil
	}
	reqs := make([]ctrlreconcile.Request, 0, len(list.Items))
	for _, st := range list.Items {
		reqs = append(reqs, ctrlreconcile.Request{NamespacedName: types.NamespacedName{Namespace: st.Namespace, Name: st.Name}})
	}
	return reqs
}
