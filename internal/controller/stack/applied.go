package stack

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/stackrun"
)

// appliedWorkspaces remembers, per Workspace, what this operator's last
// server-side apply sent and the resourceVersion the API server answered
// with, so that a resync that would apply the same content onto an object
// nobody has written since can skip the request (applyWorkspace). It lives
// in memory only: after a restart, covers compares the cached Workspace
// with the apply instead.
// The zero value is ready to use.
type appliedWorkspaces struct {
	m sync.Map // types.NamespacedName → appliedWorkspace
}

// appliedWorkspace is one remembered apply.
type appliedWorkspace struct {
	uid             types.UID
	resourceVersion string
	digest          string
	// stackVersion and source are the Stack's resourceVersion and the
	// resolved source (sourceKey) the applied content was built from.
	stackVersion, source string
}

// workspaceDigest is the digest of the Workspace an apply would send; ""
// (which never counts as unchanged) if it cannot be encoded.
func workspaceDigest(ws *autov1alpha1.Workspace) string {
	b, err := json.Marshal(ws)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// unchanged reports whether current, as read, is the object the last
// apply of the content with digest left: same object (UID), not written
// since (resourceVersion).
func (a *appliedWorkspaces) unchanged(current *autov1alpha1.Workspace, digest string) bool {
	if current == nil || current.ResourceVersion == "" || digest == "" {
		return false
	}
	v, ok := a.m.Load(types.NamespacedName{Namespace: current.Namespace, Name: current.Name})
	if !ok {
		return false
	}
	last := v.(appliedWorkspace)
	return last.uid == current.UID && last.resourceVersion == current.ResourceVersion && last.digest == digest
}

// record remembers that applying the content with digest, built from the
// Stack as of stackVersion and the source whose sourceKey is source, left
// ws, the object the API server answered with.
func (a *appliedWorkspaces) record(ws *autov1alpha1.Workspace, digest, stackVersion, source string) {
	a.m.Store(types.NamespacedName{Namespace: ws.Namespace, Name: ws.Name},
		appliedWorkspace{uid: ws.UID, resourceVersion: ws.ResourceVersion, digest: digest, stackVersion: stackVersion, source: source})
}

// sourceKey identifies everything of a resolved source that goes into the
// Workspace: not only its revision but where it is fetched from (a
// Program's artifact URL can change while its revision does not, and the
// Stack does not change with it); "" (never settled) if it cannot be
// encoded.
func sourceKey(src stackrun.Source) string {
	b, err := json.Marshal(src)
	if err != nil {
		return ""
	}
	return string(b)
}

// settled reports whether nothing an apply is built from has changed since
// the last one: current is, to the resourceVersion, what it left, and the
// Stack (to its resourceVersion) and the resolved source (sourceKey) are
// those it was built from. Then even building the Workspace again can be skipped, which
// a resync of thousands of idle Stacks does once a minute each.
func (a *appliedWorkspaces) settled(current *autov1alpha1.Workspace, stackVersion, source string) bool {
	if current == nil || current.ResourceVersion == "" || stackVersion == "" || source == "" {
		return false
	}
	v, ok := a.m.Load(types.NamespacedName{Namespace: current.Namespace, Name: current.Name})
	if !ok {
		return false
	}
	last := v.(appliedWorkspace)
	return last.uid == current.UID && last.resourceVersion == current.ResourceVersion &&
		last.stackVersion == stackVersion && last.source == source
}

// forget drops what is remembered of the Workspace ns/name.
func (a *appliedWorkspaces) forget(ns, name string) {
	a.m.Delete(types.NamespacedName{Namespace: ns, Name: name})
}

// covers reports whether current already holds everything desired (the
// Workspace an apply would send) sets: every field of desired is in
// current with the same value. Such an apply would change nothing, so a
// resync may skip it even when this process has not applied the object
// itself (after a restart, or in a shard that just took the Stack over).
// Lists must match in length and element by element, which errs towards
// applying: a list merged by key with entries of another field manager
// counts as different. Fields current has and desired does not (defaults,
// status, others' additions) do not matter: an apply leaves them.
//
// The Workspace must already be this operator's, applied by FieldManager:
// an apply also takes the fields over, so that a later one that drops a
// field removes it. One written by another manager (the Pulumi Kubernetes
// Operator, before a migration) is applied once, even unchanged.
func covers(current, desired *autov1alpha1.Workspace) bool {
	if current == nil || !appliedBy(current, FieldManager) {
		return false
	}
	have, err1 := toUnstructured(current)
	want, err2 := toUnstructured(desired)
	if err1 != nil || err2 != nil {
		return false
	}
	delete(want, "apiVersion")
	delete(want, "kind")
	return subset(want, have)
}

func toUnstructured(obj any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}

// subset reports whether want is contained in have, as covers means it.
func subset(want, have any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			hv, ok := h[k]
			if !ok || !subset(wv, hv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !subset(w[i], h[i]) {
				return false
			}
		}
		return true
	default:
		return want == have
	}
}

// appliedBy reports whether manager has applied obj (server-side apply).
func appliedBy(obj metav1.Object, manager string) bool {
	for _, f := range obj.GetManagedFields() {
		if f.Manager == manager && f.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}
