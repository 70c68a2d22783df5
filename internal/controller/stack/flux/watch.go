package flux

import (
	"context"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// IndexField is the name of the field index on Stacks that SetupIndex
// registers and StacksFor queries: a Stack is indexed by IndexValue of its
// spec.fluxSource.
const IndexField = "stackyard.fluxSource"

// IndexValue is the index value of a Flux source: "<namespace>/<kind>/<name>".
// The API version is left out, so a Stack referencing v1beta2 is found from
// a v1 watch event of the same object.
func IndexValue(namespace, kind, name string) string {
	return namespace + "/" + kind + "/" + name
}

// IndexStack is the index function of IndexField: the IndexValue of the
// Stack's Flux source, or nothing when it has none.
func IndexStack(obj client.Object) []string {
	st, ok := obj.(*pulumiv1.Stack)
	if !ok || st.Spec.FluxSource == nil {
		return nil
	}
	ref := st.Spec.FluxSource.SourceRef
	return []string{IndexValue(st.Namespace, ref.Kind, ref.Name)}
}

// SetupIndex registers IndexField on Stacks with the manager's field
// indexer (mgr.GetFieldIndexer()); call it before the manager starts.
func SetupIndex(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &pulumiv1.Stack{}, IndexField, IndexStack)
}

// StacksFor maps a Flux source object to reconcile requests for the Stacks
// in its namespace that reference it, read from c (a cached client with
// SetupIndex registered). It is the map function for
// handler.EnqueueRequestsFromMapFunc; a failed list is logged and maps to
// nothing.
func StacksFor(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []ctrlreconcile.Request {
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		var stacks pulumiv1.StackList
		err := c.List(ctx, &stacks, client.InNamespace(obj.GetNamespace()),
			client.MatchingFields{IndexField: IndexValue(obj.GetNamespace(), kind, obj.GetName())})
		if err != nil {
			log.FromContext(ctx).Error(err, "listing the Stacks of a Flux source", "kind", kind, "namespace", obj.GetNamespace(), "name", obj.GetName())
			return nil
		}
		reqs := make([]ctrlreconcile.Request, 0, len(stacks.Items))
		for _, st := range stacks.Items {
			reqs = append(reqs, ctrlreconcile.Request{NamespacedName: client.ObjectKeyFromObject(&st)})
		}
		return reqs
	}
}

// ArtifactChanged passes the events of a Flux source that can change what
// Resolve returns: creation, deletion, and updates that change
// status.artifact, the Ready condition's status or status.observedGeneration.
// Flux updates status often (conditions' messages, lastHandledReconcileAt);
// the rest is filtered out.
func ArtifactChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return resolvedState(e.ObjectOld) != resolvedState(e.ObjectNew)
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// sourceState is the part of a source's status that Resolve reads.
type sourceState struct {
	artifact   string
	ready      string
	observed   int64
	generation int64
}

// resolvedState extracts the sourceState of an unstructured source; any
// other object gives the zero state.
func resolvedState(obj client.Object) sourceState {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return sourceState{}
	}
	var s sourceState
	if art, found, _ := unstructured.NestedMap(u.Object, "status", "artifact"); found {
		s.artifact = stringOf(art["url"]) + " " + stringOf(art["digest"]) + " " + stringOf(art["revision"])
	}
	if c := readyCondition(u); c != nil {
		s.ready = string(c.Status)
	}
	s.observed, _, _ = unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	s.generation = u.GetGeneration()
	return s
}

// stringOf returns v when it is a string, else "".
func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

// Watches returns an unstructured object of each kind in Kinds, at
// version v1, that the cluster serves, for the Stack controller's
// Watches(obj, handler.EnqueueRequestsFromMapFunc(StacksFor(c)),
// builder.WithPredicates(ArtifactChanged())). Kinds the cluster does not
// serve (Flux not installed, or an older Flux without ExternalArtifact)
// are left out, since watching them would keep the manager from starting.
func Watches(mapper apimeta.RESTMapper) ([]client.Object, error) {
	var objs []client.Object
	for _, kind := range Kinds {
		gvk := schema.GroupVersionKind{Group: Group, Version: "v1", Kind: kind}
		if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			if apimeta.IsNoMatchError(err) {
				continue
			}
			return nil, err
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		objs = append(objs, u)
	}
	return objs, nil
}
