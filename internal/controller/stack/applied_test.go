package stack

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/stackrun"
)

func TestAppliedWorkspacesUnchanged(t *testing.T) {
	ws := func(ns, name, uid, rv string) *autov1alpha1.Workspace {
		return &autov1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, UID: types.UID(uid), ResourceVersion: rv}}
	}
	var a appliedWorkspaces
	a.record(ws("apps", "web", "u1", "10"), "d1", "s7", "rev1")
	for _, tc := range []struct {
		name    string
		current *autov1alpha1.Workspace
		digest  string
		want    bool
	}{
		{"as applied", ws("apps", "web", "u1", "10"), "d1", true},
		{"none in the cache", nil, "d1", false},
		{"written since", ws("apps", "web", "u1", "11"), "d1", false},
		{"the cache still holds an older version", ws("apps", "web", "u1", "9"), "d1", false},
		{"another content to apply", ws("apps", "web", "u1", "10"), "d2", false},
		{"deleted and created again", ws("apps", "web", "u2", "10"), "d1", false},
		{"never applied", ws("apps", "api", "u1", "10"), "d1", false},
		{"no resourceVersion", ws("apps", "web", "u1", ""), "d1", false},
		{"no digest", ws("apps", "web", "u1", "10"), "", false},
	} {
		if got := a.unchanged(tc.current, tc.digest); got != tc.want {
			t.Errorf("%s: unchanged = %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		name                 string
		current              *autov1alpha1.Workspace
		stackVersion, source string
		want                 bool
	}{
		{"nothing changed", ws("apps", "web", "u1", "10"), "s7", "rev1", true},
		{"the Stack written since", ws("apps", "web", "u1", "10"), "s8", "rev1", false},
		{"a new revision", ws("apps", "web", "u1", "10"), "s7", "rev2", false},
		{"no source", ws("apps", "web", "u1", "10"), "s7", "", false},
		{"the Workspace written since", ws("apps", "web", "u1", "11"), "s7", "rev1", false},
		{"deleted and created again", ws("apps", "web", "u2", "10"), "s7", "rev1", false},
		{"none in the cache", nil, "s7", "rev1", false},
		{"no Stack version", ws("apps", "web", "u1", "10"), "", "rev1", false},
	} {
		if got := a.settled(tc.current, tc.stackVersion, tc.source); got != tc.want {
			t.Errorf("%s: settled = %v, want %v", tc.name, got, tc.want)
		}
	}
	a.forget("apps", "web")
	if a.unchanged(ws("apps", "web", "u1", "10"), "d1") || a.settled(ws("apps", "web", "u1", "10"), "s7", "rev1") {
		t.Error("a forgotten apply still counts")
	}
}

func TestWorkspaceDigest(t *testing.T) {
	a, err := stackrun.BuildWorkspace(testStack(nil), stackrun.Source{Git: &autov1alpha1.GitSource{URL: "https://example.invalid/r.git", Ref: "abc"}})
	if err != nil {
		t.Fatal(err)
	}
	b := a.DeepCopy()
	da := workspaceDigest(a)
	db := workspaceDigest(b)
	if da != db {
		t.Fatalf("equal Workspaces digest differently: %s, %s", da, db)
	}
	b.Spec.Git.Ref = "def"
	if db = workspaceDigest(b); da == db {
		t.Fatal("a changed Workspace keeps its digest")
	}
}

// TestCovers checks when a cached Workspace already holds what an apply
// would send: fields the server or others added do not matter, a changed,
// missing or removed one does, and lists must match element by element.
func TestCovers(t *testing.T) {
	desired := func() *autov1alpha1.Workspace {
		return &autov1alpha1.Workspace{
			TypeMeta: metav1.TypeMeta{APIVersion: autov1alpha1.GroupVersion.String(), Kind: "Workspace"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Labels: map[string]string{stackrun.StackNameLabel: "web"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "pulumi.com/v1", Kind: "Stack", Name: "web", UID: "u1"}}},
			Spec: autov1alpha1.WorkspaceSpec{
				ServiceAccountName: "runner",
				Env:                []corev1.EnvVar{{Name: "A", Value: "1"}},
				Stacks:             []autov1alpha1.WorkspaceStack{{Name: "dev", Create: ptr.To(true)}},
			},
		}
	}
	cached := func(change func(*autov1alpha1.Workspace)) *autov1alpha1.Workspace {
		ws := desired()
		ws.TypeMeta = metav1.TypeMeta{}
		ws.UID, ws.ResourceVersion, ws.Generation = "w1", "42", 3
		ws.Annotations = map[string]string{"stackyard.dev/setup": "digest"}
		ws.Status.ObservedGeneration = 3
		ws.ManagedFields = []metav1.ManagedFieldsEntry{
			{Manager: "stackyard-workspace-controller", Operation: metav1.ManagedFieldsOperationUpdate},
			{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply},
		}
		if change != nil {
			change(ws)
		}
		return ws
	}
	for _, tc := range []struct {
		name    string
		current *autov1alpha1.Workspace
		want    bool
	}{
		{"none cached", nil, false},
		{"as applied, with what the server and others added", cached(nil), true},
		{"a label added by someone", cached(func(ws *autov1alpha1.Workspace) { ws.Labels["team"] = "x" }), true},
		{"a value changed", cached(func(ws *autov1alpha1.Workspace) { ws.Spec.ServiceAccountName = "other" }), false},
		{"a field removed", cached(func(ws *autov1alpha1.Workspace) { ws.Spec.ServiceAccountName = "" }), false},
		{"a label removed", cached(func(ws *autov1alpha1.Workspace) { delete(ws.Labels, stackrun.StackNameLabel) }), false},
		{"a list element changed", cached(func(ws *autov1alpha1.Workspace) { ws.Spec.Env[0].Value = "2" }), false},
		{"a list element added", cached(func(ws *autov1alpha1.Workspace) {
			ws.Spec.Env = append(ws.Spec.Env, corev1.EnvVar{Name: "B", Value: "2"})
		}), false},
		{"another owner", cached(func(ws *autov1alpha1.Workspace) { ws.OwnerReferences[0].UID = "u2" }), false},
		{"never applied by stackyard (PKO's, say)", cached(func(ws *autov1alpha1.Workspace) {
			ws.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "pulumi-kubernetes-operator", Operation: metav1.ManagedFieldsOperationApply}}
		}), false},
	} {
		if got := covers(tc.current, desired()); got != tc.want {
			t.Errorf("%s: covers = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSourceKey checks that a source fetched from elsewhere at the same
// revision (a Program's artifact served at a new URL) is another source to
// settled.
func TestSourceKey(t *testing.T) {
	at := func(url string) stackrun.Source {
		return stackrun.Source{Flux: &autov1alpha1.FluxSource{URL: url, Digest: "sha256:1"}, Revision: "sha256:1"}
	}
	if sourceKey(at("http://a/x.tgz")) == sourceKey(at("http://b/x.tgz")) {
		t.Error("a new artifact URL at the same revision has the same key")
	}
	if sourceKey(at("http://a/x.tgz")) != sourceKey(at("http://a/x.tgz")) { //nolint:staticcheck // two builds of one source must give one key
		t.Error("the same source has two keys")
	}
}
