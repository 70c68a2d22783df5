package workspace

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// SetupWithManager registers the index of Updates by workspace and a
// controller that watches Workspaces (new generations, deletion, and
// annotation changes other than the controller's own), Updates (created,
// deleted, started or completed: they decide whether the agent runs), the
// runtime's owned objects and the runtime's events.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.APIReader = mgr.GetAPIReader()
	r.Options = r.Options.withDefaults()
	for _, gvk := range []schema.GroupVersionKind{autov1alpha1.GroupVersion.WithKind("Workspace"), autov1alpha1.GroupVersion.WithKind("Update"),
		pulumiv1.GroupVersion.WithKind("Stack")} {
		if !r.Scheme.Recognizes(gvk) {
			return fmt.Errorf("the scheme does not know %s: add its API package to it", gvk)
		}
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &autov1alpha1.Update{}, UpdateIndex, func(obj client.Object) []string {
		if u, ok := obj.(*autov1alpha1.Update); ok && u.Spec.WorkspaceName != "" {
			return []string{u.Spec.WorkspaceName}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing Updates by workspace: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("workspace").
		For(&autov1alpha1.Workspace{}, builder.WithPredicates(workspaceChanged())).
		// An Update that finishes may free its agent's place for a
		// Workspace in line: that reconcile goes ahead of the first
		// reconciles of a burst's new Workspaces, and so do the runtime's
		// wakes below.
		Watches(&autov1alpha1.Update{}, sreconcile.UrgentOnUpdate(handler.EnqueueRequestsFromMapFunc(workspaceOfUpdate), updateFinished),
			builder.WithPredicates(updateMatters())).
		// A Stack's Workspace waits for the Stack to record it
		// (change.AuthorizeWorkspace): the record wakes it.
		Watches(&pulumiv1.Stack{}, handler.EnqueueRequestsFromMapFunc(recordedWorkspace), builder.WithPredicates(workspaceRecorded())).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.MaxConcurrentReconciles})
	for _, obj := range r.Options.Owns {
		b = b.Owns(obj)
	}
	if r.Options.RuntimeEvents != nil {
		b = b.WatchesRawSource(source.Channel(r.Options.RuntimeEvents, sreconcile.Urgent[client.Object](&handler.EnqueueRequestForObject{})))
	}
	return b.Complete(r)
}

// recordedWorkspace is the Workspace a Stack's status.workspace records.
func recordedWorkspace(_ context.Context, obj client.Object) []reconcile.Request {
	st, ok := obj.(*pulumiv1.Stack)
	if !ok || st.Status.Workspace == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: st.Namespace, Name: st.Status.Workspace.Name}}}
}

// workspaceRecorded passes the Stack updates that change the Workspace
// its status records.
func workspaceRecorded() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, _ := e.ObjectOld.(*pulumiv1.Stack)
			n, _ := e.ObjectNew.(*pulumiv1.Stack)
			return o != nil && n != nil && n.Status.Workspace != nil && !equality.Semantic.DeepEqual(o.Status.Workspace, n.Status.Workspace)
		},
	}
}

// updateFinished reports whether an update event is an Update's
// completion (autov1alpha1.UpdateCompleted).
func updateFinished(old, new client.Object) bool {
	o, _ := old.(*autov1alpha1.Update)
	n, _ := new.(*autov1alpha1.Update)
	return autov1alpha1.UpdateCompleted(o, n)
}

// NotifyChannel returns a channel for Options.RuntimeEvents and the
// function that sends a Workspace to it, for a runtime's callback (the
// local runtime's Options.OnExit). Sending never blocks the runtime.
func NotifyChannel() (<-chan event.GenericEvent, func(types.NamespacedName)) {
	ch := make(chan event.GenericEvent, 64)
	return ch, func(key types.NamespacedName) {
		ws := &autov1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		go func() { ch <- event.GenericEvent{Object: ws} }()
	}
}

// workspaceOfUpdate maps an Update to its Workspace.
func workspaceOfUpdate(_ context.Context, obj client.Object) []reconcile.Request {
	u, ok := obj.(*autov1alpha1.Update)
	if !ok || u.Spec.WorkspaceName == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: u.Namespace, Name: u.Spec.WorkspaceName}}}
}

// updateMatters passes the Update events that change whether its
// Workspace is in use: creation, deletion, and changes of workspace,
// completion, progress reason or deletion.
func updateMatters() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, okOld := e.ObjectOld.(*autov1alpha1.Update)
			n, okNew := e.ObjectNew.(*autov1alpha1.Update)
			if !okOld || !okNew {
				return false
			}
			return o.Spec.WorkspaceName != n.Spec.WorkspaceName ||
				o.Status.IsComplete() != n.Status.IsComplete() ||
				progressReason(o) != progressReason(n) ||
				o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
		},
	}
}

// progressReason is the reason of a running Update's Progressing
// condition, "" when it is not True.
func progressReason(u *autov1alpha1.Update) string {
	c := apimeta.FindStatusCondition(u.Status.Conditions, autov1alpha1.UpdateConditionTypeProgressing)
	if c == nil || c.Status != metav1.ConditionTrue {
		return ""
	}
	return c.Reason
}

// workspaceChanged passes Workspace events that need a reconcile:
// creation, deletion, a new generation, the start of deletion, and
// annotation changes except the controller's own bookkeeping.
func workspaceChanged() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld == nil || e.ObjectNew == nil {
				return false
			}
			return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
				e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero() ||
				!maps.Equal(foreign(e.ObjectOld.GetAnnotations()), foreign(e.ObjectNew.GetAnnotations()))
		},
	}
}

// foreign returns the annotations not written by this controller.
func foreign(in map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range in {
		if !strings.HasPrefix(k, "workspace.stackyard.dev/") {
			out[k] = v
		}
	}
	return out
}
