package gitserver

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// lsRemote runs the real git client against url and returns its output.
func lsRemote(t *testing.T, url string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", "ls-remote", url)
	cmd.Env = gitEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestServer(t *testing.T) {
	s := New(t)
	r := s.CreateRepo("app")
	first := r.Commit("main", map[string]string{"Pulumi.yaml": "name: app\n", "dir/a.txt": "a"})
	second := r.Commit("main", map[string]string{"dir/b.txt": "b"})
	r.Branch("feature", first)

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "only.txt"), []byte("only"), 0o644); err != nil {
		t.Fatal(err)
	}
	third := r.CommitDir("snapshot", dir)

	if got := r.Head("main"); got != second {
		t.Errorf("Head(main) = %s, want %s", got, second)
	}
	if got := r.Git("rev-parse", "main~1"); got != first {
		t.Errorf("main~1 = %s, want %s", got, first)
	}
	if got := r.Git("ls-tree", "-r", "--name-only", "main"); got != "Pulumi.yaml\ndir/a.txt\ndir/b.txt" {
		t.Errorf("main tree = %q", got)
	}
	if got := r.Git("ls-tree", "-r", "--name-only", third); got != "only.txt" {
		t.Errorf("snapshot tree = %q", got)
	}

	out, err := lsRemote(t, r.URL)
	if err != nil {
		t.Fatalf("git ls-remote: %v: %s", err, out)
	}
	for _, want := range []string{second + "\tHEAD", second + "\trefs/heads/main", first + "\trefs/heads/feature", third + "\trefs/heads/snapshot"} {
		if !strings.Contains(out, want) {
			t.Errorf("ls-remote output lacks %q:\n%s", want, out)
		}
	}

	r.DeleteBranch("feature")
	if r.Head("feature") != "" {
		t.Errorf("feature still exists")
	}

	s.SetBasicAuth("u", "p")
	if out, err := lsRemote(t, r.URL); err == nil {
		t.Errorf("anonymous ls-remote succeeded against an authenticated server:\n%s", out)
	}
	authURL := strings.Replace(r.URL, "http://", "http://u:p@", 1)
	if out, err := lsRemote(t, authURL); err != nil {
		t.Errorf("authenticated ls-remote: %v: %s", err, out)
	}
	s.SetBasicAuth("", "")
	if out, err := lsRemote(t, r.URL); err != nil {
		t.Errorf("ls-remote after turning auth off: %v: %s", err, out)
	}
}

func TestRequestsAndCommitOptions(t *testing.T) {
	s := New(t)
	r := s.CreateRepo("app")
	at := time.Date(2025, 2, 3, 4, 5, 6, 0, time.UTC)
	sha := r.CommitWith("main", map[string]string{"a": "1"}, CommitOptions{Message: "Subject\n\nBody", Author: "Ada <ada@example.com>", Time: at})
	if got := r.Git("log", "-1", "--format=%an|%ae|%aI|%cI|%B", sha); got != "Ada|ada@example.com|2025-02-03T04:05:06+00:00|2025-02-03T04:05:06+00:00|Subject\n\nBody" {
		t.Errorf("commit = %q", got)
	}
	r.Tag("v1", sha)
	r.AnnotatedTag("v2", "main", "second")
	if got := r.Git("cat-file", "-t", "refs/tags/v2"); got != "tag" {
		t.Errorf("v2 is a %s, want an annotated tag", got)
	}

	if out, err := lsRemote(t, r.URL); err != nil || !strings.Contains(out, sha+"\trefs/tags/v1") {
		t.Fatalf("ls-remote: %v: %s", err, out)
	}
	// The git CLI speaks protocol v2 unless told otherwise; both count the
	// same.
	for i, version := range []string{"2", "0"} {
		cmd := exec.Command("git", "-c", "protocol.version="+version, "clone", "--quiet", "--bare", r.URL, filepath.Join(t.TempDir(), "clone"))
		cmd.Env = gitEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("clone: %v: %s", err, out)
		}
		got := s.Requests("app")
		if want := (Requests{RefLists: 2 + i, Fetches: 1 + i}); got != want || got.LsRemotes() != 1 {
			t.Errorf("protocol v%s: Requests = %+v, want %+v (one ls-remote)", version, got, want)
		}
	}
	if other := s.Requests("other"); other != (Requests{}) {
		t.Errorf("Requests(other) = %+v", other)
	}
}
