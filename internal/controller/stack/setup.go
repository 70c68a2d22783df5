package stack

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/controller/stack/flux"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// ProgramIndex indexes Stacks by the Program they deploy.
const ProgramIndex = "spec.programRef.name"

// Options tunes the controller.
type Options struct {
	// MaxConcurrentReconciles is how many Stacks are reconciled at once.
	// Reconciles never wait for an operation, so a small number serves
	// many stacks.
	MaxConcurrentReconciles int
}

// SetupWithManager registers the reconciler and what wakes it: the Stack
// itself (spec changes, reconcile requests, deletion), its Workspace and
// Updates (one that finishes ahead of other work), the Programs and Flux
// sources it reads, the branch it tracks moving (branches, which the
// manager runs), and the Stacks it depends on turning Ready.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	indexer := mgr.GetFieldIndexer()
	if err := indexer.IndexField(ctx, &pulumiv1.Stack{}, PrerequisiteIndex, indexPrerequisites); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &pulumiv1.Stack{}, ProgramIndex, indexProgram); err != nil {
		return err
	}
	if err := flux.SetupIndex(ctx, indexer); err != nil {
		return err
	}
	r.branches = newBranches(r.Poller)
	if err := mgr.Add(r.branches); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("stack").
		For(&pulumiv1.Stack{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			predicate.AnnotationChangedPredicate{},
			sreconcile.DeletionStarted(),
			r.Shard.Moved(),
		))).
		Owns(&autov1alpha1.Workspace{}).
		// An Update that finishes makes its Stack Ready: that reconcile
		// goes ahead of the first reconciles of a burst's new Stacks.
		Watches(&autov1alpha1.Update{}, sreconcile.UrgentOnUpdate(
			handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &pulumiv1.Stack{}, handler.OnlyControllerOwner()),
			updateCompleted)).
		Watches(&pulumiv1.Stack{}, handler.EnqueueRequestsFromMapFunc(r.dependentsOf)).
		Watches(&pulumiv1.Program{}, handler.EnqueueRequestsFromMapFunc(r.stacksOfProgram)).
		WatchesRawSource(source.Channel(r.branches.wake, &handler.TypedEnqueueRequestForObject[*pulumiv1.Stack]{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(opts.MaxConcurrentReconciles, 1)})
	sources, err := flux.Watches(mgr.GetRESTMapper())
	if err != nil {
		return err
	}
	for _, src := range sources {
		b = b.Watches(src, handler.EnqueueRequestsFromMapFunc(flux.StacksFor(mgr.GetClient())), builder.WithPredicates(flux.ArtifactChanged()))
	}
	return b.Complete(r)
}

func indexProgram(obj client.Object) []string {
	stack, ok := obj.(*pulumiv1.Stack)
	if !ok || stack.Spec.ProgramRef == nil {
		return nil
	}
	return []string{stack.Spec.ProgramRef.Name}
}

// dependentsOf maps a Stack to the Stacks that list it as a prerequisite.
func (r *Reconciler) dependentsOf(ctx context.Context, obj client.Object) []ctrlreconcile.Request {
	return r.listRequests(ctx, obj.GetNamespace(), PrerequisiteIndex, obj.GetName())
}

// stacksOfProgram maps a Program to the Stacks that deploy it.
func (r *Reconciler) stacksOfProgram(ctx context.Context, obj client.Object) []ctrlreconcile.Request {
	return r.listRequests(ctx, obj.GetNamespace(), ProgramIndex, obj.GetName())
}

func (r *Reconciler) listRequests(ctx context.Context, namespace, index, value string) []ctrlreconcile.Request {
	var list pulumiv1.StackList
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{index: value}); err != nil {
		log.FromContext(ctx).Error(err, "listing stacks", "index", index, "value", value)
		return nil
	}
	reqs := make([]ctrlreconcile.Request, 0, len(list.Items))
	for _, s := range list.Items {
		reqs = append(reqs, ctrlreconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
	}
	return reqs
}

// updateCompleted reports whether an update event is an Update's
// completion (autov1alpha1.UpdateCompleted).
func updateCompleted(old, new client.Object) bool {
	o, _ := old.(*autov1alpha1.Update)
	n, _ := new.(*autov1alpha1.Update)
	return autov1alpha1.UpdateCompleted(o, n)
}
