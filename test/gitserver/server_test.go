package gitserver

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
