package source

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackyard/stackyard/test/gitserver"
)

func TestListRefs(t *testing.T) {
	srv := gitserver.New(t)
	repo := srv.CreateRepo("app")
	first := repo.Commit("main", map[string]string{"Pulumi.yaml": "name: app\nruntime: yaml\n"})
	second := repo.Commit("main", map[string]string{"v.txt": "2"})
	feature := repo.Commit("feature", map[string]string{"f.txt": "f"})
	repo.Tag("v1.0.0", first)
	repo.AnnotatedTag("v2.0.0", second, "second release")

	refs, err := ListRefs(context.Background(), repo.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Ref{
		{Name: "HEAD", Commit: second, Target: "refs/heads/main"},
		{Name: "refs/heads/feature", Commit: feature},
		{Name: "refs/heads/main", Commit: second},
		{Name: "refs/tags/v1.0.0", Commit: first},
		{Name: "refs/tags/v2.0.0", Commit: second}, // peeled
	}
	if len(refs) != len(want) {
		t.Fatalf("ListRefs = %+v, want %+v", refs, want)
	}
	for i := range want {
		if refs[i] != want[i] {
			t.Errorf("ref %d = %+v, want %+v", i, refs[i], want[i])
		}
	}
	if tags := Tags(refs); len(tags) != 2 || tags[0].Short() != "v1.0.0" || !tags[1].IsTag() || tags[1].IsBranch() {
		t.Errorf("Tags = %+v", tags)
	}

	for _, tt := range []struct{ branch, want string }{
		{branch: "main", want: second},
		{branch: "refs/heads/feature", want: feature},
		{branch: "", want: second},
	} {
		got, err := HeadOf(refs, tt.branch)
		if err != nil || got.Commit != tt.want || !got.IsBranch() {
			t.Errorf("HeadOf(%q) = %+v, %v; want the branch at %s", tt.branch, got, err, tt.want)
		}
	}
	_, err = HeadOf(refs, "nope")
	if e := wantReason(t, err, ReasonNotFound); e.Field != FieldBranch || !strings.Contains(e.Message, `"nope"`) {
		t.Errorf("HeadOf(nope) = %v, want a NotFound naming the branch", err)
	}
	_, err = HeadOf(refs, "bad..name")
	if e := wantReason(t, err, ReasonInvalidSpec); e.Field != FieldBranch {
		t.Errorf("HeadOf(bad..name) = %v, want InvalidSpec on the branch", err)
	}
}

func TestListRefsErrors(t *testing.T) {
	srv := gitserver.New(t)
	repo := srv.CreateRepo("app")
	repo.Commit("main", map[string]string{"a": "a"})
	ctx := context.Background()

	_, err := ListRefs(ctx, "file:///etc", nil)
	if e := wantReason(t, err, ReasonInvalidSpec); e.Field != FieldURL || !e.Permanent {
		t.Errorf("file URL: %v", err)
	}
	_, err = ListRefs(ctx, srv.RepoURL("missing"), nil)
	if e := wantReason(t, err, ReasonNotFound); e.Field != FieldURL || !e.Permanent {
		t.Errorf("missing repository: %v", err)
	}
	srv.SetBasicAuth("user", "right-password")
	_, err = ListRefs(ctx, repo.URL, &GitAuth{Username: "user", Password: "wrong-password"})
	if e := wantReason(t, err, ReasonAuthFailed); !e.Permanent {
		t.Errorf("wrong password: %v", err)
	}
	assertNoSecrets(t, err, "wrong-password")
	if _, err := ListRefs(ctx, repo.URL, &GitAuth{Username: "user", Password: "right-password"}); err != nil {
		t.Errorf("right password: %v", err)
	}
}

func TestPollerRefsShared(t *testing.T) {
	srv := newCountingServer(t)
	repo := srv.CreateRepo("app")
	head := repo.Commit("main", map[string]string{"a": "a"})
	repo.Tag("v1", head)
	p := NewPoller()

	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			refs, err := p.Refs(context.Background(), repo.URL, nil, time.Minute)
			if err != nil || len(refs) != 3 {
				t.Errorf("Refs = %+v, %v", refs, err)
				return
			}
			refs[0].Name = "scribbled" // each caller gets its own copy
		})
	}
	wg.Wait()
	refs, err := p.Refs(context.Background(), repo.URL, nil, time.Minute)
	if err != nil || refs[0].Name != "HEAD" {
		t.Fatalf("Refs after the callers = %+v, %v", refs, err)
	}
	if n := srv.total.Load(); n != 1 {
		t.Errorf("21 callers made %d remote queries, want 1", n)
	}
	// Other credentials are another query; a branch poll is its own too.
	if _, err := p.Refs(context.Background(), repo.URL, &GitAuth{Username: "u", Password: "p"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Latest(context.Background(), repo.URL, "main", nil, time.Minute); err != nil || got != head {
		t.Fatalf("Latest = %q, %v", got, err)
	}
	if n := srv.total.Load(); n != 3 {
		t.Errorf("%d remote queries, want 3", n)
	}
	// Failures are shared as well.
	for range 3 {
		_, err := p.Refs(context.Background(), srv.RepoURL("missing"), nil, time.Minute)
		wantReason(t, err, ReasonNotFound)
	}
	if n := srv.total.Load(); n != 4 {
		t.Errorf("%d remote queries after a shared failure, want 4", n)
	}
}
