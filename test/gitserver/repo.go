package gitserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// DefaultBranch is the branch a new repository's HEAD points to.
const DefaultBranch = "main"

// Repo is one bare repository served by a Server. Its helpers write commits
// straight into the bare repository with git plumbing commands, which is what
// a push would leave behind, without needing a work tree or receive-pack.
type Repo struct {
	// Name is the repository name without the ".git" suffix.
	Name string
	// URL is the HTTP clone URL.
	URL string
	// Dir is the bare repository's directory on disk.
	Dir string

	t       testing.TB
	commits int
}

// CreateRepo creates an empty bare repository named name whose HEAD points
// to DefaultBranch. Fetching by exact commit SHA is allowed, as on GitHub
// and GitLab, so clients can check out a commit no branch points to.
func (s *Server) CreateRepo(name string) *Repo {
	s.t.Helper()
	r := &Repo{Name: name, URL: s.RepoURL(name), Dir: filepath.Join(s.Root, name+".git"), t: s.t}
	r.run("", nil, "init", "--quiet", "--bare", "--initial-branch="+DefaultBranch, r.Dir)
	for _, kv := range [][2]string{
		{"http.uploadpack", "true"},
		{"uploadpack.allowReachableSHA1InWant", "true"},
		{"uploadpack.allowAnySHA1InWant", "true"},
		{"uploadpack.allowFilter", "true"},
	} {
		r.Git("config", kv[0], kv[1])
	}
	return r
}

// Git runs a git command inside the bare repository with the server's
// isolated environment and returns its trimmed standard output, failing the
// test if git fails.
func (r *Repo) Git(args ...string) string {
	r.t.Helper()
	return r.run("", nil, append([]string{"--git-dir=" + r.Dir}, args...)...)
}

// Commit adds a commit on branch whose tree is the branch's current tree
// with files (path → content) written over it, creating the branch if it
// does not exist, and returns the new commit's SHA.
func (r *Repo) Commit(branch string, files map[string]string) string {
	r.t.Helper()
	return r.CommitWith(branch, files, CommitOptions{})
}

// CommitOptions sets what a commit leaves at the server's defaults.
type CommitOptions struct {
	// Message is the commit message; empty means "commit N on BRANCH".
	Message string
	// Author is "Name <email>"; empty means the server's fixed identity.
	Author string
	// Time is the author and committer time; zero means the server's
	// fixed clock, 2024-01-01T00:00:00Z.
	Time time.Time
}

// env returns the git environment the options set.
func (o CommitOptions) env() []string {
	var env []string
	if o.Author != "" {
		name, email, _ := strings.Cut(o.Author, " <")
		env = append(env, "GIT_AUTHOR_NAME="+name, "GIT_AUTHOR_EMAIL="+strings.TrimSuffix(email, ">"))
	}
	if !o.Time.IsZero() {
		at := o.Time.UTC().Format(time.RFC3339)
		env = append(env, "GIT_AUTHOR_DATE="+at, "GIT_COMMITTER_DATE="+at)
	}
	return env
}

// CommitWith is Commit with a message, author or time of its own.
func (r *Repo) CommitWith(branch string, files map[string]string, opts CommitOptions) string {
	r.t.Helper()
	parent := r.Head(branch)
	index := r.scratchIndex()
	if parent != "" {
		r.run("", index, "--git-dir="+r.Dir, "read-tree", parent)
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		blob := r.run(files[p], nil, "--git-dir="+r.Dir, "hash-object", "-w", "--stdin")
		r.run("", index, "--git-dir="+r.Dir, "update-index", "--add", "--cacheinfo", "100644,"+blob+","+p)
	}
	return r.finish(branch, parent, index, opts)
}

// CommitDir adds a commit on branch whose tree is exactly the content of the
// directory dir on disk (for example a test program under testdata/), and
// returns the new commit's SHA.
func (r *Repo) CommitDir(branch, dir string) string {
	r.t.Helper()
	parent := r.Head(branch)
	index := r.scratchIndex()
	r.run("", index, "--git-dir="+r.Dir, "--work-tree="+dir, "add", "--all", ".")
	return r.finish(branch, parent, index, CommitOptions{})
}

// Tag points the lightweight tag name at rev (a commit SHA or a branch
// name), creating or moving it.
func (r *Repo) Tag(name, rev string) {
	r.t.Helper()
	sha := r.Git("rev-parse", "--verify", rev+"^{commit}")
	r.Git("update-ref", "refs/tags/"+name, sha)
}

// AnnotatedTag creates the annotated tag name of rev with message,
// replacing any tag of that name.
func (r *Repo) AnnotatedTag(name, rev, message string) {
	r.t.Helper()
	sha := r.Git("rev-parse", "--verify", rev+"^{commit}")
	r.Git("tag", "--force", "--annotate", "--message", message, name, sha)
}

// Branch points branch at rev (a commit SHA or another branch name),
// creating or moving it.
func (r *Repo) Branch(branch, rev string) {
	r.t.Helper()
	sha := r.Git("rev-parse", "--verify", rev+"^{commit}")
	r.Git("update-ref", "refs/heads/"+branch, sha)
}

// DeleteBranch removes branch from the repository.
func (r *Repo) DeleteBranch(branch string) {
	r.t.Helper()
	r.Git("update-ref", "-d", "refs/heads/"+branch)
}

// Head returns the commit SHA branch points to, or "" if there is no such
// branch.
func (r *Repo) Head(branch string) string {
	r.t.Helper()
	cmd := exec.Command("git", "--git-dir="+r.Dir, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch+"^{commit}")
	cmd.Env = gitEnv()
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// finish writes the scratch index as a tree, commits it on top of parent
// with opts and moves branch to the new commit.
func (r *Repo) finish(branch, parent string, index []string, opts CommitOptions) string {
	r.t.Helper()
	tree := r.run("", index, "--git-dir="+r.Dir, "write-tree")
	r.commits++
	msg := opts.Message
	if msg == "" {
		msg = fmt.Sprintf("commit %d on %s", r.commits, branch)
	}
	args := []string{"--git-dir=" + r.Dir, "commit-tree", tree, "-m", msg}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	sha := r.run("", opts.env(), args...)
	r.Git("update-ref", "refs/heads/"+branch, sha)
	return sha
}

// scratchIndex returns the environment that points git at a fresh index
// file, so building a tree never touches shared state.
func (r *Repo) scratchIndex() []string {
	f, err := os.CreateTemp(r.t.TempDir(), "index-")
	if err != nil {
		r.t.Fatalf("gitserver: %v", err)
	}
	name := f.Name()
	_ = f.Close()
	_ = os.Remove(name)
	return []string{"GIT_INDEX_FILE=" + name}
}

// run executes git with args, optional stdin and extra environment, and
// returns its trimmed standard output, failing the test on error.
func (r *Repo) run(stdin string, env []string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Env = append(gitEnv(), env...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		r.t.Fatalf("gitserver: git %s: %v: %s", strings.Join(args, " "), err, stderr)
	}
	return strings.TrimSpace(string(out))
}
