package source

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackyard/stackyard/test/gitserver"
)

// TestCompare compares two releases of a repository on a real git server:
// forward (the commits the newer one brings, the files changed under the
// directory, their unified diff) and backward (a rollback: the same
// commits, taken out, and the reverse diff).
func TestCompare(t *testing.T) {
	srv := gitserver.New(t)
	repo := srv.CreateRepo("app")
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	old := repo.CommitWith("main", map[string]string{"infra/Pulumi.yaml": "name: app\nsize: 1\n", "docs/a.md": "a"},
		gitserver.CommitOptions{Message: "Initial program", Time: t0})
	second := repo.CommitWith("main", map[string]string{"infra/Pulumi.yaml": "name: app\nsize: 2\n"},
		gitserver.CommitOptions{Message: "Bigger\n\nMore room.", Author: "Ada Lovelace <ada@example.com>", Time: t0.Add(time.Hour)})
	third := repo.CommitWith("main", map[string]string{"docs/a.md": "b", "infra/new.yaml": "x: 1\n"},
		gitserver.CommitOptions{Message: "Docs and a file", Time: t0.Add(2 * time.Hour)})
	ctx := context.Background()

	fwd, err := Compare(ctx, repo.URL, nil, old, third, "infra")
	if err != nil {
		t.Fatal(err)
	}
	var shas []string
	for _, c := range fwd.Commits {
		shas = append(shas, c.SHA)
	}
	if fwd.Reverse || fwd.CommitCount != 2 || !slices.Equal(shas, []string{third, second}) {
		t.Errorf("forward: reverse %v, %d commits %v, want %v", fwd.Reverse, fwd.CommitCount, shas, []string{third, second})
	}
	if c := fwd.Commits[1]; c.Subject != "Bigger" || c.Author != "Ada Lovelace <ada@example.com>" || !c.Time.Equal(t0.Add(time.Hour)) {
		t.Errorf("second commit = %+v", c)
	}
	if !slices.Equal(fwd.Paths, []string{"infra/Pulumi.yaml", "infra/new.yaml"}) || fwd.PathCount != 2 {
		t.Errorf("forward paths = %v (%d), want the two under infra/", fwd.Paths, fwd.PathCount)
	}
	for _, want := range []string{"--- a/infra/Pulumi.yaml", "+++ b/infra/Pulumi.yaml", "-size: 1", "+size: 2", "+++ b/infra/new.yaml", "+x: 1"} {
		if !strings.Contains(fwd.Patch, want) {
			t.Errorf("forward patch lacks %q:\n%s", want, fwd.Patch)
		}
	}
	if strings.Contains(fwd.Patch, "docs/a.md") {
		t.Errorf("the patch shows a file outside infra/:\n%s", fwd.Patch)
	}

	back, err := Compare(ctx, repo.URL, nil, third, old, "infra/")
	if err != nil {
		t.Fatal(err)
	}
	if !back.Reverse || back.CommitCount != 2 || back.Commits[0].SHA != third {
		t.Errorf("rollback: reverse %v, %d commits, first %s", back.Reverse, back.CommitCount, back.Commits[0].SHA)
	}
	if !strings.Contains(back.Patch, "-size: 2") || !strings.Contains(back.Patch, "+size: 1") || !strings.Contains(back.Patch, "-x: 1") {
		t.Errorf("rollback patch is not the reverse:\n%s", back.Patch)
	}

	whole, err := Compare(ctx, repo.URL, nil, old, third, "")
	if err != nil || whole.PathCount != 3 {
		t.Errorf("the whole repository: %+v, %v", whole, err)
	}

	_, err = Compare(ctx, repo.URL, nil, strings.Repeat("a", 40), third, "")
	var serr *Error
	if !errors.As(err, &serr) || serr.Reason != ReasonNotFound || !strings.Contains(err.Error(), "not among the last") {
		t.Errorf("an unknown commit: %v", err)
	}
}

// TestComparePatchBounded cuts a patch larger than MaxComparePatch at a
// line, and says so.
func TestComparePatchBounded(t *testing.T) {
	srv := gitserver.New(t)
	repo := srv.CreateRepo("big")
	old := repo.Commit("main", map[string]string{"a.txt": "a\n"})
	big := strings.Repeat("a line of the new file\n", MaxComparePatch/20)
	next := repo.Commit("main", map[string]string{"a.txt": big})
	c, err := Compare(context.Background(), repo.URL, nil, old, next, "")
	if err != nil {
		t.Fatal(err)
	}
	if !c.PatchTruncated || len(c.Patch) > MaxComparePatch || !strings.HasSuffix(c.Patch, "\n") {
		t.Errorf("patch of %d bytes, truncated %v", len(c.Patch), c.PatchTruncated)
	}
}
