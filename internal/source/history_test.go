package source

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackyard/stackyard/test/gitserver"
)

func TestHistory(t *testing.T) {
	srv := gitserver.New(t)
	repo := srv.CreateRepo("app")
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	root := repo.CommitWith("main", map[string]string{"Pulumi.yaml": "name: app\n", "infra/a.yaml": "a"},
		gitserver.CommitOptions{Message: "Initial program", Time: t0})
	second := repo.CommitWith("main", map[string]string{"infra/a.yaml": "a2", "docs/x.md": "x"},
		gitserver.CommitOptions{Message: "Change a\n\nBecause it had to.\n", Author: "Ada Lovelace <ada@example.com>", Time: t0.Add(time.Hour)})
	// A side branch merged into main: main's history follows first parents.
	repo.Branch("side", second)
	side := repo.CommitWith("side", map[string]string{"side.txt": "s"}, gitserver.CommitOptions{Time: t0.Add(90 * time.Minute)})
	tree := repo.Git("rev-parse", side+"^{tree}")
	merge := repo.Git("commit-tree", tree, "-p", second, "-p", side, "-m", "Merge side")
	repo.Git("update-ref", "refs/heads/main", merge)
	third := repo.CommitWith("main", map[string]string{"docs/y.md": "y"}, gitserver.CommitOptions{Message: "Docs", Time: t0.Add(2 * time.Hour)})

	ctx := context.Background()
	got, err := History(ctx, repo.URL, "main", nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	var shas []string
	for _, c := range got {
		shas = append(shas, c.SHA)
		if !c.Diffed {
			t.Errorf("commit %s (%s) not diffed", c.SHA, c.Subject)
		}
	}
	if want := []string{third, merge, second, root}; !slices.Equal(shas, want) {
		t.Fatalf("History = %v, want %v (first parents only)", shas, want)
	}
	c := got[2]
	if c.Subject != "Change a" || c.Message != "Change a\n\nBecause it had to." || c.Author != "Ada Lovelace <ada@example.com>" ||
		!c.Time.Equal(t0.Add(time.Hour)) || !slices.Equal(c.Paths, []string{"docs/x.md", "infra/a.yaml"}) || !slices.Equal(c.Parents, []string{root}) {
		t.Errorf("second commit = %+v", c)
	}
	if c := got[1]; !slices.Equal(c.Paths, []string{"side.txt"}) || len(c.Parents) != 2 {
		t.Errorf("merge = %+v, want the paths it brings to main", c)
	}
	if c := got[3]; !slices.Equal(c.Paths, []string{"Pulumi.yaml", "infra/a.yaml"}) {
		t.Errorf("root = %+v, want every file", c)
	}

	// A shallow history: every commit returned still knows its paths.
	got, err = History(ctx, repo.URL, "refs/heads/main", nil, 2)
	if err != nil || len(got) != 2 || got[1].SHA != merge || !got[1].Diffed {
		t.Fatalf("History depth 2 = %+v, %v", got, err)
	}

	_, err = History(ctx, repo.URL, "nope", nil, 5)
	if e := wantReason(t, err, ReasonNotFound); e.Field != FieldBranch {
		t.Errorf("missing branch: %v", err)
	}
	_, err = History(ctx, srv.RepoURL("missing"), "main", nil, 5)
	if e := wantReason(t, err, ReasonNotFound); e.Field != FieldURL || !e.Permanent {
		t.Errorf("missing repository: %v", err)
	}
}

func TestDescribe(t *testing.T) {
	srv := gitserver.New(t)
	repo := srv.CreateRepo("app")
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	a := repo.CommitWith("main", map[string]string{"a": "1"}, gitserver.CommitOptions{Message: "A", Time: t0})
	b := repo.CommitWith("main", map[string]string{"a": "2"}, gitserver.CommitOptions{Message: "B", Time: t0.Add(time.Minute)})
	repo.Tag("v1.0.0", a)
	repo.AnnotatedTag("v1.1.0", b, "release 1.1")
	repo.Tag("also-b", b)

	got, err := Describe(context.Background(), repo.URL, []string{"refs/tags/v1.0.0", "refs/tags/v1.1.0", "refs/tags/also-b"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[a].Subject != "A" || got[b].Subject != "B" || !got[b].Time.Equal(t0.Add(time.Minute)) {
		t.Errorf("Describe = %+v", got)
	}
	// One commit deep: without its parent, a commit's paths are unknown.
	got, err = Describe(context.Background(), repo.URL, []string{"refs/tags/v1.1.0"}, nil)
	if err != nil || len(got) != 1 || got[b].Diffed || got[b].Paths != nil {
		t.Errorf("Describe(v1.1.0) = %+v, %v; want B without paths", got, err)
	}
	_, err = Describe(context.Background(), repo.URL, []string{"refs/tags/gone"}, nil)
	wantReason(t, err, ReasonNotFound)
}

func TestPollerCachesCommits(t *testing.T) {
	srv := gitserver.New(t)
	repo := srv.CreateRepo("app")
	for i := range 5 {
		repo.Commit("main", map[string]string{"f": strings.Repeat("x", i)})
	}
	repo.Tag("v1", "main~1")
	p := NewPoller()
	ctx := context.Background()
	refs, err := p.Refs(ctx, repo.URL, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	head, err := HeadOf(refs, "main")
	if err != nil {
		t.Fatal(err)
	}
	fetches := func() int { return srv.Requests("app").Fetches }

	first, err := p.History(ctx, repo.URL, head, nil, 3)
	if err != nil || len(first) != 3 || first[0].SHA != head.Commit {
		t.Fatalf("History = %+v, %v", first, err)
	}
	if n := fetches(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
	// The same head again, or less of it, is answered from memory; more of
	// it is fetched.
	for _, depth := range []int{3, 2} {
		again, err := p.History(ctx, repo.URL, head, nil, depth)
		if err != nil || len(again) != depth || again[depth-1].SHA != first[depth-1].SHA {
			t.Errorf("History depth %d = %+v, %v", depth, again, err)
		}
	}
	if n := fetches(); n != 1 {
		t.Errorf("%d fetches after cached histories, want 1", n)
	}
	if got, err := p.History(ctx, repo.URL, head, nil, 5); err != nil || len(got) != 5 {
		t.Errorf("History depth 5 = %+v, %v", got, err)
	}
	if n := fetches(); n != 2 {
		t.Errorf("%d fetches, want 2", n)
	}

	// Commits described by History serve Describe, and the other way round
	// only where paths are not needed.
	tags := Tags(refs)
	got, err := p.Describe(ctx, repo.URL, tags, nil)
	if err != nil || len(got) != 1 || got[tags[0].Commit].SHA != first[1].SHA {
		t.Fatalf("Describe = %+v, %v", got, err)
	}
	if n := fetches(); n != 2 {
		t.Errorf("%d fetches after describing a known commit, want 2", n)
	}
	// Other credentials see nothing of this.
	if _, err := p.Describe(ctx, repo.URL, tags, &GitAuth{Username: "u", Password: "p"}); err != nil {
		t.Fatal(err)
	}
	if n := fetches(); n != 3 {
		t.Errorf("%d fetches, want 3", n)
	}
}
