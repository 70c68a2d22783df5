package source

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// sha is a commit SHA for tests that never reach a server.
const sha = "0123456789abcdef0123456789abcdef01234567"

// TestRequestArgsRoundTrip checks that DecodeArgs reads back every field
// Args writes, including values a naive encoding would break.
func TestRequestArgsRoundTrip(t *testing.T) {
	all := map[Credential]string{}
	for _, c := range Credentials {
		all[c] = "/etc/stackyard/git/" + string(c)
	}
	tests := []struct {
		name string
		req  Request
	}{
		{name: "empty", req: Request{}},
		{name: "git commit", req: Request{Git: &GitRequest{URL: "https://example.com/org/repo.git", Commit: sha, Dir: "infra", Shallow: true}}},
		{name: "git branch", req: Request{Git: &GitRequest{URL: "git@example.com:org/repo.git", Branch: "refs/tags/v1"}}},
		{name: "git default branch", req: Request{Git: &GitRequest{URL: "ssh://git@example.com/repo"}}},
		{name: "git every credential", req: Request{Git: &GitRequest{URL: "https://ghe.example.com/org/repo", Branch: "main",
			CredentialFiles: all, GitHubAPIURL: "https://ghe.example.com/api/v3"}}},
		{name: "values that look like flags", req: Request{Git: &GitRequest{URL: "--artifact-url=x", Branch: "-main", Dir: "a=b c"}}},
		{name: "artifact", req: Request{Artifact: &ArtifactSpec{URL: "http://source-controller/a.tar.gz?x=1&y=2", Digest: "sha256:" + strings.Repeat("ab", 32), Dir: "./app"}}},
		{name: "project", req: Request{Project: &ProjectSpec{Name: "web", Runtime: "yaml"}}},
		// Exactly one kind is Fetch's rule, not the encoding's.
		{name: "two kinds", req: Request{Project: &ProjectSpec{Name: "web"}, Artifact: &ArtifactSpec{Digest: "d"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.req.Args()
			got, err := DecodeArgs(args)
			if err != nil {
				t.Fatalf("DecodeArgs(%q): %v", args, err)
			}
			if !reflect.DeepEqual(got, tt.req) {
				t.Errorf("DecodeArgs(%q) = %s, want %s", args, describe(got), describe(tt.req))
			}
		})
	}
}

// TestRequestArgsSeparateCommitAndBranch checks that a commit and a branch
// travel in flags of their own: neither is guessed from the other's shape.
func TestRequestArgsSeparateCommitAndBranch(t *testing.T) {
	args := Request{Git: &GitRequest{URL: "https://example.com/r", Commit: sha}}.Args()
	if !slices.Contains(args, "--git-commit="+sha) || slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--git-branch") }) {
		t.Errorf("commit encoded as %q", args)
	}
	// A branch named like a commit stays a branch.
	got, err := DecodeArgs([]string{"--git-url", "https://example.com/r", "--git-branch", sha})
	if err != nil || got.Git == nil || got.Git.Branch != sha || got.Git.Commit != "" {
		t.Errorf("DecodeArgs = %s, %v; want the SHA as a branch", describe(got), err)
	}
}

// TestDecodeArgsRefuses checks what is not a source flag.
func TestDecodeArgsRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"--git-ref", "main"},
		{"--target", "/tmp/x"},
		{"--git-url"},
		{"https://example.com/r"},
		{"--git-shallow=maybe"},
	} {
		if got, err := DecodeArgs(args); err == nil {
			t.Errorf("DecodeArgs(%q) = %s, want an error", args, describe(got))
		}
	}
}

// TestRequestSpec checks that credentials are read from their files, or
// from the environment without one, and never show in errors.
func TestRequestSpec(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := map[string]string{"STACKYARD_GIT_USERNAME": "from-env", "STACKYARD_GIT_PASSWORD": "env-password"}
	getenv := func(k string) string { return env[k] }

	req := Request{Git: &GitRequest{URL: "https://example.com/r", Commit: sha, Dir: "infra", Shallow: true, CredentialFiles: map[Credential]string{
		CredentialPassword: write("password", "s3cret-password\n"),
		CredentialSSHKey:   write("key", "  raw key\n"),
	}}}
	spec, err := req.Spec(getenv)
	if err != nil {
		t.Fatal(err)
	}
	want := GitSpec{URL: "https://example.com/r", Commit: sha, Dir: "infra", Shallow: true,
		Auth: &GitAuth{Username: "from-env", Password: "s3cret-password", SSHPrivateKey: "  raw key\n"}}
	if spec.Git == nil || !reflect.DeepEqual(*spec.Git, want) || spec.Artifact != nil || spec.Project != nil {
		t.Errorf("Spec = %+v, want git %+v", spec, want)
	}

	anonymous, err := Request{Git: &GitRequest{URL: "https://example.com/r"}}.Spec(func(string) string { return "" })
	if err != nil || anonymous.Git.Auth != nil {
		t.Errorf("Spec without credentials = %+v, %v; want no auth", anonymous.Git, err)
	}

	app, err := Request{Git: &GitRequest{URL: "https://example.com/r", GitHubAPIURL: "https://ghe.example.com/api/v3",
		CredentialFiles: map[Credential]string{
			CredentialGitHubAppID:             write("app", "12\n"),
			CredentialGitHubAppInstallationID: write("inst", "34\n"),
			CredentialGitHubAppPrivateKey:     write("pem", "PEM"),
		}}}.Spec(getenv)
	if err != nil || app.Git.Auth.GitHubApp == nil ||
		*app.Git.Auth.GitHubApp != (GitHubApp{AppID: "12", InstallationID: 34, PrivateKey: "PEM", APIURL: "https://ghe.example.com/api/v3"}) {
		t.Errorf("GitHub App = %+v, %v", app.Git.Auth, err)
	}

	_, err = Request{Git: &GitRequest{URL: "https://example.com/r", CredentialFiles: map[Credential]string{
		CredentialGitHubAppInstallationID: write("bad-inst", "s3cret-id")}}}.Spec(getenv)
	var e *Error
	if !errors.As(err, &e) || e.Field != FieldGitHubAppInstallationID || e.Reason != ReasonInvalidSpec || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("installation ID not a number: err = %v", err)
	}

	_, err = Request{Git: &GitRequest{URL: "https://example.com/r", CredentialFiles: map[Credential]string{
		CredentialToken: filepath.Join(dir, "nope")}}}.Spec(getenv)
	if !errors.As(err, &e) || e.Field != FieldAuth || !strings.Contains(err.Error(), "--git-token-file") || IsPermanent(err) {
		t.Errorf("missing file: err = %v, want a transient error naming --git-token-file", err)
	}
}

// describe prints a Request with its pointers followed.
func describe(r Request) string {
	return fmt.Sprintf("{Git:%+v Artifact:%+v Project:%+v}", r.Git, r.Artifact, r.Project)
}
