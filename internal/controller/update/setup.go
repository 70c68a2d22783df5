package update

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// WorkspaceIndex is the field index of Updates by spec.workspaceName. Only
// Updates that are not complete are indexed: they are the ones a change of
// their Workspace concerns.
const WorkspaceIndex = "update.spec.workspaceName.incomplete"

// SetupWithManager registers the reconciler with mgr: the index of Updates
// by workspace, the registry of running operations (stopped with the
// manager, which cancels them), and a controller that watches Updates (on
// creation, a new generation and the start of their deletion), Workspaces
// (when one is created, gets ready or starts serving, for the Updates
// waiting on it) and the
// notifications of finished operations.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.prepare()
	for _, kind := range []string{"Update", "Workspace"} {
		if !r.Scheme.Recognizes(autov1alpha1.GroupVersion.WithKind(kind)) {
			return fmt.Errorf("the scheme does not know %s %s: add api/auto/v1alpha1 to it", autov1alpha1.GroupVersion, kind)
		}
	}
	r.APIReader = mgr.GetAPIReader()
	r.log = mgr.GetLogger().WithValues("controller", "update")
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &autov1alpha1.Update{}, WorkspaceIndex, indexByWorkspace); err != nil {
		return fmt.Errorf("indexing Updates by workspace: %w", err)
	}
	if err := mgr.Add(r.runs); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("update").
		For(&autov1alpha1.Update{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			sreconcile.DeletionStarted(),
		))).
		// A Workspace that starts serving has an agent waiting for the
		// Updates that wait for it, and a wake is the next Update of a
		// Workspace whose operation ended: both go ahead of the first
		// reconciles of a burst's new Updates.
		Watches(&autov1alpha1.Workspace{},
			sreconcile.UrgentOnUpdate(handler.EnqueueRequestsFromMapFunc(r.updatesOfWorkspace), startedServing),
			builder.WithPredicates(workspaceStateChanged())).
		WatchesRawSource(source.Channel(r.wake, sreconcile.Urgent[*autov1alpha1.Update](&handler.TypedEnqueueRequestForObject[*autov1alpha1.Update]{}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.MaxConcurrentReconciles}).
		Complete(r)
}

// indexByWorkspace indexes an Update that is not complete under its
// workspace's name.
func indexByWorkspace(obj client.Object) []string {
	u, ok := obj.(*autov1alpha1.Update)
	if !ok || u.Spec.WorkspaceName == "" || u.Status.IsComplete() {
		return nil
	}
	return []string{u.Spec.WorkspaceName}
}

// updatesOfWorkspace maps a Workspace to the Updates that wait for it.
func (r *Reconciler) updatesOfWorkspace(ctx context.Context, ws client.Object) []reconcile.Request {
	keys, err := r.incompleteUpdates(ctx, types.NamespacedName{Namespace: ws.GetNamespace(), Name: ws.GetName()})
	if err != nil {
		log.FromContext(ctx).Error(err, "listing the Updates of a workspace", "workspace", ws.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(keys))
	for _, k := range keys {
		reqs = append(reqs, reconcile.Request{NamespacedName: k})
	}
	return reqs
}

// wakeWorkspace asks for a reconcile of the Updates of ws that are not
// complete, except the Update except: the workspace has become free.
func (r *Reconciler) wakeWorkspace(ctx context.Context, ws, except types.NamespacedName) {
	keys, err := r.incompleteUpdates(ctx, ws)
	if err != nil {
		log.FromContext(ctx).Error(err, "listing the Updates of a workspace", "workspace", ws.Name)
		return
	}
	for _, k := range keys {
		if k != except {
			r.notify(k)
		}
	}
}

// incompleteUpdates lists, from the cache, the Updates of workspace ws that
// are not complete.
func (r *Reconciler) incompleteUpdates(ctx context.Context, ws types.NamespacedName) ([]types.NamespacedName, error) {
	list := &autov1alpha1.UpdateList{}
	if err := r.Client.List(ctx, list, client.InNamespace(ws.Namespace), client.MatchingFields{WorkspaceIndex: ws.Name}); err != nil {
		return nil, err
	}
	keys := make([]types.NamespacedName, 0, len(list.Items))
	for i := range list.Items {
		keys = append(keys, client.ObjectKeyFromObject(&list.Items[i]))
	}
	return keys, nil
}

// workspaceStateChanged passes a Workspace's creation, and the changes of
// what its waiting Updates wait for: whether it is ready for its
// generation, and whether it serves (the Workspace's Serving). The second
// is the moment they can run; the first keeps their Pending message true.
func workspaceStateChanged() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return true },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return waitState(e.ObjectOld) != waitState(e.ObjectNew)
		},
	}
}

// startedServing reports whether a Workspace update event is the
// Workspace starting to serve.
func startedServing(old, new client.Object) bool {
	return !waitState(old).serving && waitState(new).serving
}

// waitState is what an Update waiting for the Workspace obj sees of it.
// A new agent address counts: after an operator restart the Workspace can
// serve throughout while its agent is replaced.
func waitState(obj client.Object) waitView {
	ws, ok := obj.(*autov1alpha1.Workspace)
	if !ok || ws == nil {
		return waitView{}
	}
	return waitView{ready: readyAtGeneration(ws), serving: ws.Serving(), address: ws.Status.Address}
}

// waitView is the part of a Workspace an Update waiting for it reacts to.
type waitView struct {
	ready, serving bool
	address        string
}
