package stack

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
)

// appliedWorkspaces remembers, per Workspace, what this operator's last
// server-side apply sent and the resourceVersion the API server answered
// with, so that a resync that would apply the same content onto an object
// nobody has written since can skip the request (applyWorkspace). It lives
// in memory only: after a restart every Workspace is applied once more.
// The zero value is ready to use.
type appliedWorkspaces struct {
	m sync.Map // types.NamespacedName → appliedWorkspace
}

// appliedWorkspace is one remembered apply.
type appliedWorkspace struct {
	uid             types.UID
	resourceVersion string
	digest          string
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

// record remembers that applying the content with digest left ws, the
// object the API server answered with.
func (a *appliedWorkspaces) record(ws *autov1alpha1.Workspace, digest string) {
	a.m.Store(types.NamespacedName{Namespace: ws.Namespace, Name: ws.Name},
		appliedWorkspace{uid: ws.UID, resourceVersion: ws.ResourceVersion, digest: digest})
}

// forget drops what is remembered of the Workspace ns/name.
func (a *appliedWorkspaces) forget(ns, name string) {
	a.m.Delete(types.NamespacedName{Namespace: ns, Name: name})
}
