package local_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/test/gitserver"
)

// TestSharedSource: Workspaces of one namespace that deploy the same
// commit fetch it once; another namespace, or a branch, fetches its own.
func TestSharedSource(t *testing.T) {
	ns, other := newNamespace(t), newNamespace(t)
	rt, _ := newRuntime(t, "")
	srv := gitserver.New(t)
	repo := srv.CreateRepo("shared")
	commit := repo.Commit("main", map[string]string{"infra/Pulumi.yaml": fmt.Sprintf(program, "shared")})
	fetches := func() int { return srv.Requests("shared").Fetches }

	gitWorkspace := func(ns, name, ref string) *autov1alpha1.Workspace {
		ws := localWorkspace(t, ns, name)
		ws.Spec.Local = nil
		ws.Spec.Git = &autov1alpha1.GitSource{URL: repo.URL, Ref: ref, Dir: "infra"}
		return ws
	}
	ensure := func(ws *autov1alpha1.Workspace) {
		t.Helper()
		st, err := rt.Ensure(ctx(t), ws)
		if err != nil || !st.Ready || st.Revision != commit {
			t.Fatalf("Ensure %s/%s = %+v, %v; want revision %s", ws.Namespace, ws.Name, st, err, commit)
		}
		info, err := client(t, rt, ws).Info(ctx(t), &agentpb.InfoRequest{})
		if err != nil || info.GetProject() != "shared" {
			t.Fatalf("Info of %s = %v, %v; want project shared", ws.Name, info, err)
		}
	}

	first := gitWorkspace(ns, "first", commit)
	ensure(first)
	if fetches() != 1 {
		t.Fatalf("the first Workspace fetched %d times, want 1", fetches())
	}
	// What the first Workspace writes into its copy stays its own.
	settings := filepath.Join(rt.StateDir(ns, "first"), "source", "infra", "Pulumi.dev.yaml")
	if err := os.WriteFile(settings, []byte("config: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	second := gitWorkspace(ns, "second", commit)
	ensure(second)
	if fetches() != 1 {
		t.Fatalf("a second Workspace on the same commit fetched again (%d fetches)", fetches())
	}
	if _, err := os.Stat(filepath.Join(rt.StateDir(ns, "second"), "source", "infra", "Pulumi.dev.yaml")); !os.IsNotExist(err) {
		t.Fatalf("the second Workspace got the first one's stack settings: %v", err)
	}

	// Workspaces that miss the cache at once (the first agents of a
	// burst) fetch the commit once between them.
	next := repo.Commit("release", map[string]string{"infra/Pulumi.yaml": fmt.Sprintf(program, "shared")})
	var wg sync.WaitGroup
	burst := make([]*autov1alpha1.Workspace, 3)
	for i := range burst {
		ws := gitWorkspace(ns, fmt.Sprintf("burst-%d", i), next)
		burst[i] = ws
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, err := rt.Ensure(ctx(t), ws); err != nil || !st.Ready || st.Revision != next {
				t.Errorf("Ensure %s = %+v, %v; want revision %s", ws.Name, st, err, next)
			}
		}()
	}
	wg.Wait()
	if fetches() != 2 {
		t.Fatalf("3 Workspaces missing the same commit at once fetched it %d times, want 1", fetches()-1)
	}
	for _, ws := range burst {
		if err := rt.Delete(ctx(t), ws); err != nil {
			t.Fatal(err)
		}
	}

	ensure(gitWorkspace(other, "third", commit))
	if fetches() != 3 {
		t.Fatalf("a Workspace of another namespace fetched %d times, want 1 (its own fetch)", fetches()-2)
	}
	ensure(gitWorkspace(ns, "branch", "main"))
	if fetches() != 4 {
		t.Fatalf("a Workspace on a branch did not fetch (%d fetches)", fetches())
	}
}
