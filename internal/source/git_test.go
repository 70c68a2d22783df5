package source

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackyard/stackyard/test/gitserver"
)

// programRepo is a repository with a program at the root and one in infra/,
// a feature branch, and an older commit no branch points to any more.
type programRepo struct {
	repo    *gitserver.Repo
	first   string // main's first commit
	main    string // main's tip
	feature string // feature's tip
}

// newProgramRepo creates the repository on srv.
func newProgramRepo(t *testing.T, srv *gitserver.Server, name string) *programRepo {
	t.Helper()
	r := srv.CreateRepo(name)
	p := &programRepo{repo: r}
	p.first = r.Commit("main", map[string]string{
		"Pulumi.yaml":       "name: app\nruntime: yaml\n",
		"version.txt":       "v1",
		"infra/Pulumi.yaml": "name: infra\nruntime: yaml\n",
		"docs/README.md":    "no program here",
	})
	p.main = r.Commit("main", map[string]string{"version.txt": "v2"})
	r.Branch("feature", p.main)
	p.feature = r.Commit("feature", map[string]string{"version.txt": "feature"})
	return p
}

func TestFetchGit(t *testing.T) {
	srv := gitserver.New(t)
	p := newProgramRepo(t, srv, "app")
	ctx := context.Background()

	tests := []struct {
		name        string
		spec        GitSpec
		wantCommit  string
		wantVersion string
		wantDir     string
		wantShallow bool
	}{
		{name: "branch", spec: GitSpec{Branch: "main"}, wantCommit: p.main, wantVersion: "v2"},
		{name: "full branch ref", spec: GitSpec{Branch: "refs/heads/feature"}, wantCommit: p.feature, wantVersion: "feature"},
		{name: "default branch", spec: GitSpec{}, wantCommit: p.main, wantVersion: "v2"},
		{name: "exact commit", spec: GitSpec{Commit: p.first}, wantCommit: p.first, wantVersion: "v1"},
		{name: "shallow branch", spec: GitSpec{Branch: "feature", Shallow: true}, wantCommit: p.feature, wantVersion: "feature", wantShallow: true},
		{name: "shallow commit", spec: GitSpec{Commit: p.first, Shallow: true}, wantCommit: p.first, wantVersion: "v1", wantShallow: true},
		{name: "repoDir", spec: GitSpec{Branch: "main", Dir: "infra"}, wantCommit: p.main, wantVersion: "v2", wantDir: "infra"},
		{name: "dir with dot and slash", spec: GitSpec{Branch: "main", Dir: "./infra/"}, wantCommit: p.main, wantVersion: "v2", wantDir: "infra"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "src")
			tt.spec.URL = p.repo.URL
			res, err := FetchGit(ctx, target, tt.spec)
			if err != nil {
				t.Fatalf("FetchGit: %v", err)
			}
			if res.Commit != tt.wantCommit {
				t.Errorf("commit = %s, want %s", res.Commit, tt.wantCommit)
			}
			if got := readFile(t, target, "version.txt"); got != tt.wantVersion {
				t.Errorf("version.txt = %q, want %q", got, tt.wantVersion)
			}
			if want := filepath.Join(target, tt.wantDir); res.Dir != want {
				t.Errorf("Dir = %s, want %s", res.Dir, want)
			}
			_, err = os.Stat(filepath.Join(target, ".git", "shallow"))
			if shallow := err == nil; shallow != tt.wantShallow {
				t.Errorf("shallow = %v, want %v", shallow, tt.wantShallow)
			}
			if left := siblings(t, target); len(left) != 0 {
				t.Errorf("leftovers beside target: %v", left)
			}
		})
	}
}

func TestFetchGitErrors(t *testing.T) {
	srv := gitserver.New(t)
	p := newProgramRepo(t, srv, "app")
	ctx := context.Background()
	missingSHA := strings.Repeat("ab", 20)

	tests := []struct {
		name      string
		spec      GitSpec
		reason    Reason
		permanent bool
		field     Field
		contains  string
	}{
		{name: "missing branch", spec: GitSpec{URL: p.repo.URL, Branch: "nope"}, reason: ReasonNotFound, field: FieldBranch, contains: `branch "nope" not found`},
		{name: "missing commit", spec: GitSpec{URL: p.repo.URL, Commit: missingSHA}, reason: ReasonNotFound, field: FieldCommit, contains: "commit " + missingSHA},
		{name: "missing commit shallow", spec: GitSpec{URL: p.repo.URL, Commit: missingSHA, Shallow: true}, reason: ReasonNotFound, field: FieldCommit},
		{name: "missing dir", spec: GitSpec{URL: p.repo.URL, Branch: "main", Dir: "nope"}, reason: ReasonNotFound, permanent: true, field: FieldDir,
			contains: `dir: "nope": no such directory in commit ` + p.main},
		{name: "dir without Pulumi.yaml", spec: GitSpec{URL: p.repo.URL, Branch: "main", Dir: "docs"}, reason: ReasonNotFound, permanent: true, field: FieldDir, contains: "no Pulumi.yaml"},
		{name: "dir is a file", spec: GitSpec{URL: p.repo.URL, Branch: "main", Dir: "version.txt"}, reason: ReasonNotFound, permanent: true, field: FieldDir},
		{name: "dir escapes", spec: GitSpec{URL: p.repo.URL, Branch: "main", Dir: "../outside"}, reason: ReasonInvalidSpec, permanent: true, field: FieldDir},
		{name: "dir escapes midway", spec: GitSpec{URL: p.repo.URL, Branch: "main", Dir: "infra/../../x"}, reason: ReasonInvalidSpec, permanent: true, field: FieldDir},
		{name: "dir absolute", spec: GitSpec{URL: p.repo.URL, Branch: "main", Dir: "/etc"}, reason: ReasonInvalidSpec, permanent: true, field: FieldDir},
		{name: "branch and commit", spec: GitSpec{URL: p.repo.URL, Branch: "main", Commit: p.main}, reason: ReasonInvalidSpec, permanent: true, field: FieldCommit},
		{name: "short commit", spec: GitSpec{URL: p.repo.URL, Commit: p.main[:7]}, reason: ReasonInvalidSpec, permanent: true, field: FieldCommit},
		{name: "bad branch name", spec: GitSpec{URL: p.repo.URL, Branch: "a..b"}, reason: ReasonInvalidSpec, permanent: true, field: FieldBranch},
		{name: "file URL", spec: GitSpec{URL: "file://" + p.repo.Dir}, reason: ReasonInvalidSpec, permanent: true, field: FieldURL},
		{name: "local path", spec: GitSpec{URL: p.repo.Dir}, reason: ReasonInvalidSpec, permanent: true, field: FieldURL},
		{name: "empty URL", spec: GitSpec{}, reason: ReasonInvalidSpec, permanent: true, field: FieldURL},
		// A remote helper runs a program; go-git would read it as an
		// scp-style SSH address and ask for an SSH key.
		{name: "ext transport", spec: GitSpec{URL: "ext::sh -c touch% /tmp/pwned"}, reason: ReasonInvalidSpec, permanent: true, field: FieldURL,
			contains: `url: "ext::sh -c touch% /tmp/pwned": unsupported URL scheme "ext"`},
		{name: "fd transport", spec: GitSpec{URL: "fd::3/x"}, reason: ReasonInvalidSpec, permanent: true, field: FieldURL, contains: `unsupported URL scheme "fd"`},
		{name: "unknown scheme", spec: GitSpec{URL: "foo://example.com/x.git"}, reason: ReasonInvalidSpec, permanent: true, field: FieldURL, contains: `unsupported URL scheme "foo"`},
		{name: "missing repository", spec: GitSpec{URL: srv.RepoURL("nope"), Branch: "main"}, reason: ReasonNotFound, permanent: true, field: FieldURL},
		{name: "empty repository", spec: GitSpec{URL: srv.CreateRepo("empty").URL}, reason: ReasonNotFound, field: FieldURL},
		{name: "unreachable", spec: GitSpec{URL: "http://" + closedPort(t) + "/app.git", Branch: "main"}, reason: ReasonUnreachable, field: FieldURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "src")
			_, err := FetchGit(ctx, target, tt.spec)
			t.Logf("error: %v", err)
			e := wantReason(t, err, tt.reason)
			if e.Permanent != tt.permanent || IsPermanent(err) != tt.permanent {
				t.Errorf("permanent = %v, want %v", e.Permanent, tt.permanent)
			}
			if e.Field != tt.field {
				t.Errorf("field = %q, want %q", e.Field, tt.field)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("message %q does not contain %q", err.Error(), tt.contains)
			}
			if _, serr := os.Lstat(target); !os.IsNotExist(serr) {
				t.Errorf("target exists after failed fetch")
			}
			if left := siblings(t, target); len(left) != 0 {
				t.Errorf("leftovers beside target: %v", left)
			}
		})
	}
}

// TestFetchGitNoPartialState checks that a failed fetch leaves previous
// content untouched and a successful one replaces it wholly.
func TestFetchGitNoPartialState(t *testing.T) {
	srv := gitserver.New(t)
	p := newProgramRepo(t, srv, "app")
	ctx := context.Background()
	target := filepath.Join(t.TempDir(), "src")
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "old.txt"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, spec := range []GitSpec{
		{URL: p.repo.URL, Branch: "nope"},
		{URL: p.repo.URL, Branch: "main", Dir: "nope"}, // fails after the clone
	} {
		if _, err := FetchGit(ctx, target, spec); err == nil {
			t.Fatalf("FetchGit(%+v) succeeded, want error", spec)
		}
		if got := readFile(t, target, "old.txt"); got != "old" {
			t.Fatalf("previous content changed: %q", got)
		}
		if _, err := os.Stat(filepath.Join(target, "version.txt")); err == nil {
			t.Fatalf("failed fetch wrote into target")
		}
		if left := siblings(t, target); len(left) != 0 {
			t.Fatalf("leftovers beside target: %v", left)
		}
	}

	if _, err := FetchGit(ctx, target, GitSpec{URL: p.repo.URL, Branch: "main"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(target, "old.txt")); !os.IsNotExist(err) {
		t.Errorf("old content survived a successful fetch")
	}
	if got := readFile(t, target, "version.txt"); got != "v2" {
		t.Errorf("version.txt = %q", got)
	}
	if left := siblings(t, target); len(left) != 0 {
		t.Errorf("leftovers beside target: %v", left)
	}
}

func TestLsRemote(t *testing.T) {
	srv := gitserver.New(t)
	p := newProgramRepo(t, srv, "app")
	p.repo.Git("tag", "-a", "-m", "release", "v1", p.first)
	ctx := context.Background()

	for _, tt := range []struct{ ref, want string }{
		{"main", p.main},
		{"refs/heads/feature", p.feature},
		{"", p.main},
		{"refs/tags/v1", p.first},
	} {
		got, err := LsRemote(ctx, p.repo.URL, tt.ref, nil)
		if err != nil {
			t.Fatalf("LsRemote(%q): %v", tt.ref, err)
		}
		if got != tt.want {
			t.Errorf("LsRemote(%q) = %s, want %s", tt.ref, got, tt.want)
		}
	}
	_, err := LsRemote(ctx, p.repo.URL, "nope", nil)
	wantReason(t, err, ReasonNotFound)
	_, err = LsRemote(ctx, "http://"+closedPort(t)+"/x.git", "main", nil)
	wantReason(t, err, ReasonUnreachable)
}

// TestFetchGitTag checks that an annotated tag is checked out as the commit
// it points to.
func TestFetchGitTag(t *testing.T) {
	srv := gitserver.New(t)
	p := newProgramRepo(t, srv, "app")
	p.repo.Git("tag", "-a", "-m", "release", "v1", p.first)
	res, err := FetchGit(context.Background(), filepath.Join(t.TempDir(), "src"), GitSpec{URL: p.repo.URL, Branch: "refs/tags/v1", Shallow: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit != p.first {
		t.Errorf("commit = %s, want %s", res.Commit, p.first)
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// TestFetchGitCommitWithoutSHAWant checks the fallback for servers that do
// not allow fetching an exact SHA: the commit is found through a full fetch.
func TestFetchGitCommitWithoutSHAWant(t *testing.T) {
	srv := gitserver.New(t)
	p := newProgramRepo(t, srv, "app")
	p.repo.Git("config", "uploadpack.allowReachableSHA1InWant", "false")
	p.repo.Git("config", "uploadpack.allowAnySHA1InWant", "false")
	ctx := context.Background()
	res, err := FetchGit(ctx, filepath.Join(t.TempDir(), "src"), GitSpec{URL: p.repo.URL, Commit: p.first, Shallow: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit != p.first {
		t.Errorf("commit = %s, want %s", res.Commit, p.first)
	}
	_, err = FetchGit(ctx, filepath.Join(t.TempDir(), "src"), GitSpec{URL: p.repo.URL, Commit: strings.Repeat("cd", 20)})
	wantReason(t, err, ReasonNotFound)
}
