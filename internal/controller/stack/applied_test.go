package stack

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
)

func TestAppliedWorkspacesUnchanged(t *testing.T) {
	ws := func(ns, name, uid, rv string) *autov1alpha1.Workspace {
		return &autov1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, UID: types.UID(uid), ResourceVersion: rv}}
	}
	var a appliedWorkspaces
	a.record(ws("apps", "web", "u1", "10"), "d1")
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
	a.forget("apps", "web")
	if a.unchanged(ws("apps", "web", "u1", "10"), "d1") {
		t.Error("a forgotten apply still counts")
	}
}

func TestWorkspaceDigest(t *testing.T) {
	a, err := BuildWorkspace(testStack(nil), Source{Git: &autov1alpha1.GitSource{URL: "https://example.invalid/r.git", Ref: "abc"}})
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
