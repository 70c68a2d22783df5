package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackyard/stackyard/internal/source"
	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/testenv"
)

func TestMain(m *testing.M) {
	os.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Exit(m.Run())
}

// runInit runs `stackyard agent init` with args and returns its stdout,
// its stderr and its error.
func runInit(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := NewRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"agent", "init"}, args...))
	err := root.Execute()
	return out.String(), errOut.String(), err
}

// readReport parses the --result-file written by a run.
func readReport(t *testing.T, path string) source.Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the result file: %v", err)
	}
	r, err := source.ParseReport(string(b))
	if err != nil {
		t.Fatalf("parsing the result file %q: %v", b, err)
	}
	return r
}

// writeSecret writes a credential file the way a mounted Secret key looks.
func writeSecret(t *testing.T, dir, name, value string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAgentInitGit(t *testing.T) {
	srv := gitserver.New(t)
	srv.SetBasicAuth("robot", "s3cret-password")
	repo := srv.CreateRepo("app")
	first := repo.Commit("main", map[string]string{"infra/Pulumi.yaml": "name: first\nruntime: yaml\n"})
	second := repo.Commit("main", map[string]string{"infra/Pulumi.yaml": "name: second\nruntime: yaml\n"})
	secrets := t.TempDir()
	user := writeSecret(t, secrets, "username", "robot")
	pass := writeSecret(t, secrets, "password", "s3cret-password")

	cases := []struct {
		name, want, project string
		ref                 []string
		shallow             bool
	}{
		{name: "branch", ref: []string{"--git-branch", "main"}, want: second, project: "second"},
		{name: "default branch, shallow", want: second, project: "second", shallow: true},
		{name: "commit", ref: []string{"--git-commit", first}, want: first, project: "first"},
		{name: "commit, shallow", ref: []string{"--git-commit=" + first}, want: first, project: "first", shallow: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "source")
			result := filepath.Join(t.TempDir(), "result.json")
			args := append([]string{"--target", target, "--result-file", result, "--git-url", repo.URL,
				"--git-dir", "infra", "--git-username-file", user, "--git-password-file", pass}, tc.ref...)
			if tc.shallow {
				args = append(args, "--git-shallow")
			}
			out, _, err := runInit(t, args...)
			if err != nil {
				t.Fatalf("agent init: %v", err)
			}
			if strings.TrimSpace(out) != tc.want {
				t.Errorf("stdout = %q, want the revision %s", out, tc.want)
			}
			if r := readReport(t, result); r.Revision != tc.want || r.Failed() {
				t.Errorf("report = %+v, want revision %s", r, tc.want)
			}
			b, err := os.ReadFile(filepath.Join(target, "infra", "Pulumi.yaml"))
			if err != nil || !strings.Contains(string(b), tc.project) {
				t.Errorf("Pulumi.yaml = %q, %v; want project %s", b, err, tc.project)
			}
		})
	}

	t.Run("credentials from the environment", func(t *testing.T) {
		t.Setenv("STACKYARD_GIT_USERNAME", "robot")
		t.Setenv("STACKYARD_GIT_PASSWORD", "s3cret-password")
		target := filepath.Join(t.TempDir(), "source")
		out, _, err := runInit(t, "--target", target, "--git-url", repo.URL, "--git-dir", "infra")
		if err != nil || strings.TrimSpace(out) != second {
			t.Fatalf("agent init = %q, %v; want %s", out, err, second)
		}
	})

	t.Run("wrong password is a permanent failure without the secret", func(t *testing.T) {
		bad := writeSecret(t, secrets, "bad-password", "not-the-s3cret")
		result := filepath.Join(t.TempDir(), "result.json")
		out, errOut, err := runInit(t, "--target", filepath.Join(t.TempDir(), "source"), "--result-file", result,
			"--git-url", repo.URL, "--git-username-file", user, "--git-password-file", bad)
		if err == nil {
			t.Fatal("agent init succeeded with a wrong password")
		}
		r := readReport(t, result)
		if r.Reason != source.ReasonAuthFailed || !r.Permanent {
			t.Errorf("report = %+v, want a permanent AuthFailed", r)
		}
		for _, text := range []string{out, errOut, err.Error(), r.Message} {
			if strings.Contains(text, "not-the-s3cret") {
				t.Errorf("output leaks the password: %q", text)
			}
		}
	})

	t.Run("missing credential file", func(t *testing.T) {
		_, _, err := runInit(t, "--target", t.TempDir(), "--git-url", repo.URL,
			"--git-token-file", filepath.Join(secrets, "nope"))
		if err == nil || !strings.Contains(err.Error(), "--git-token-file") {
			t.Errorf("err = %v, want one naming --git-token-file", err)
		}
	})
}

// tarGz packs files into a tar.gz.
func tarGz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestAgentInitArtifact(t *testing.T) {
	body := tarGz(t, map[string]string{"prog/Pulumi.yaml": "name: art\nruntime: yaml\n"})
	sum := sha256.Sum256(body)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
	t.Cleanup(srv.Close)

	target := filepath.Join(t.TempDir(), "source")
	result := filepath.Join(t.TempDir(), "result.json")
	out, _, err := runInit(t, "--target", target, "--result-file", result,
		"--artifact-url", srv.URL+"/a.tar.gz", "--artifact-digest", digest, "--artifact-dir", "prog")
	if err != nil || strings.TrimSpace(out) != digest {
		t.Fatalf("agent init = %q, %v; want %s", out, err, digest)
	}
	if _, err := os.Stat(filepath.Join(target, "prog", "Pulumi.yaml")); err != nil {
		t.Error(err)
	}

	other := "sha256:" + strings.Repeat("0", 64)
	_, _, err = runInit(t, "--target", target, "--result-file", result, "--artifact-url", srv.URL+"/a.tar.gz", "--artifact-digest", other)
	if r := readReport(t, result); err == nil || r.Reason != source.ReasonDigestMismatch || r.Permanent {
		t.Errorf("digest mismatch: err %v, report %+v; want a transient DigestMismatch", err, r)
	}
	if _, err := os.Stat(filepath.Join(target, "prog", "Pulumi.yaml")); err != nil {
		t.Errorf("a failed fetch changed the target: %v", err)
	}
}

func TestAgentInitProjectAndBinary(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "source")
	bin := filepath.Join(dir, "share", "stackyard")
	out, _, err := runInit(t, "--target", target, "--project-name", "bare", "--project-runtime", "yaml", "--copy-binary", bin)
	if err != nil || out != "" {
		t.Fatalf("agent init = %q, %v; want no output", out, err)
	}
	if b, err := os.ReadFile(filepath.Join(target, "Pulumi.yaml")); err != nil || !strings.Contains(string(b), `name: "bare"`) {
		t.Errorf("Pulumi.yaml = %q, %v", b, err)
	}
	if fi, err := os.Stat(bin); err != nil || fi.Mode().Perm() != 0o755 || fi.Size() == 0 {
		t.Errorf("copied binary: %v, %v", fi, err)
	}

	// Only the copy: the agent then serves a program already in the image.
	if _, _, err := runInit(t, "--copy-binary", filepath.Join(dir, "other", "stackyard")); err != nil {
		t.Errorf("copy only: %v", err)
	}

	result := filepath.Join(dir, "result.json")
	if _, _, err := runInit(t, "--result-file", result); err == nil || !strings.Contains(err.Error(), "nothing to do") {
		t.Errorf("no source: %v, want nothing to do", err)
	}
	_, _, err = runInit(t, "--target", target, "--result-file", result, "--project-name", "bare", "--git-url", "https://example.invalid/x.git")
	if r := readReport(t, result); err == nil || r.Reason != source.ReasonInvalidSpec || !r.Permanent {
		t.Errorf("two sources: err %v, report %+v; want a permanent InvalidSpec", err, r)
	}
}

// TestAgentInitCopyAgent: --copy-agent copies the lean agent beside the
// executable when it is the same build, and otherwise the executable
// itself (which then serves as `stackyard serve`), saying why. The test
// binary plays stackyard; a copy of it with a byte appended, still the
// same build, plays its lean agent; a pinned tool's binary one of another
// build.
func TestAgentInitCopyAgent(t *testing.T) {
	testBinary, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(testBinary)
	if err != nil {
		t.Fatal(err)
	}
	other, err := os.ReadFile(filepath.Join(testenv.BinDir(), "protoc-gen-go"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	self := filepath.Join(dir, "bin", "stackyard")
	lean := filepath.Join(dir, "bin", "stackyard-agent")
	write := func(path string, content []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, content, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	leanBody := append(slices.Clip(body), 0)
	write(self, body)
	dst := filepath.Join(dir, "share", "stackyard-agent")
	for _, tc := range []struct {
		name    string
		lean    []byte // nil: none
		want    []byte
		wantWhy string
	}{
		{"the same build", leanBody, leanBody, ""},
		{"another build", other, body, "another build"},
		{"none", nil, body, "not installed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_ = os.Remove(lean)
			if tc.lean != nil {
				write(lean, tc.lean)
			}
			why, err := copyAgentOf(self, dst)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantWhy == "" && why != "" || !strings.Contains(why, tc.wantWhy) {
				t.Errorf("why = %q, want %q", why, tc.wantWhy)
			}
			got, err := os.ReadFile(dst)
			fi, _ := os.Stat(dst)
			if err != nil || !bytes.Equal(got, tc.want) || fi.Mode().Perm() != 0o755 {
				t.Errorf("copied %d bytes (%v, mode %v), want %d", len(got), err, fi.Mode(), len(tc.want))
			}
		})
	}

	// Through the command, on its own: the test binary has no lean agent
	// beside it, so it copies itself and says so.
	_, stderr, err := runInit(t, "--copy-agent", filepath.Join(dir, "pod", "stackyard-agent"))
	if err != nil {
		t.Fatalf("copy only: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "pod", "stackyard-agent")); err != nil || fi.Size() != int64(len(body)) {
		t.Errorf("copied agent: %v, %v", fi, err)
	}
	if !strings.Contains(stderr, "copied stackyard itself") {
		t.Errorf("stderr %q does not say what was copied", stderr)
	}
}

// TestLeanServeCommand: the full binary serves under the lean agent's
// command line, so a copy of it can stand in for stackyard-agent, and its
// --auth kubernetes reviews tokens as the pod, as the lean agent does: a
// KUBECONFIG from the Workspace's env must not choose the API server that
// decides who may call the agent. Outside a pod it refuses to start.
func TestLeanServeCommand(t *testing.T) {
	root := NewRootCommand()
	cmd, _, err := root.Find([]string{"serve"})
	if err != nil || cmd.Name() != "serve" || !cmd.Hidden || cmd.Flags().Lookup("auth") == nil {
		t.Fatalf("stackyard serve: %v, %v; want the hidden agent serve command", cmd, err)
	}

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	err = os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: not-a-token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	root = NewRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"serve", "--auth", "kubernetes", "--workspace", dir, "--listen", "127.0.0.1:0",
		"--workspace-namespace", "team", "--workspace-name", "ws"})
	// With the kubeconfig's authorizer it would serve until stopped: the
	// context ends that (serve stops on it) instead of the test's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = root.ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "not in a Kubernetes pod") {
		t.Fatalf("stackyard serve --auth kubernetes outside a pod, with a KUBECONFIG: %v (output %q); "+
			"want the in-pod reviews' refusal", err, out.String())
	}
	if strings.Contains(out.String(), "127.0.0.1:") {
		t.Errorf("it listened before refusing: %q", out.String())
	}
}

// TestAgentInitRefusesURL checks that a URL no fetch supports, remote
// helpers such as ext:: (which run a program) included, is a permanent
// failure of the url field, whatever credentials come with it.
func TestAgentInitRefusesURL(t *testing.T) {
	key := writeSecret(t, t.TempDir(), "key", "not a key")
	for _, url := range []string{"ext::sh -c touch% /tmp/pwned", "fd::3", "file:///etc", "/etc"} {
		t.Run(url, func(t *testing.T) {
			result := filepath.Join(t.TempDir(), "result.json")
			_, _, err := runInit(t, "--target", filepath.Join(t.TempDir(), "source"), "--result-file", result,
				"--git-url", url, "--git-ssh-key-file", key)
			r := readReport(t, result)
			if err == nil || r.Reason != source.ReasonInvalidSpec || r.Field != source.FieldURL || !r.Permanent {
				t.Errorf("err %v, report %+v; want a permanent InvalidSpec of the url", err, r)
			}
		})
	}
}

// TestAgentInitFlags checks that commit and branch have flags of their
// own and that the old combined --git-ref is gone.
func TestAgentInitFlags(t *testing.T) {
	if _, _, err := runInit(t, "--target", t.TempDir(), "--git-url", "https://example.invalid/x.git", "--git-ref", "main"); err == nil ||
		!strings.Contains(err.Error(), "unknown flag: --git-ref") {
		t.Errorf("--git-ref: %v, want an unknown flag", err)
	}
	result := filepath.Join(t.TempDir(), "result.json")
	_, _, err := runInit(t, "--target", t.TempDir(), "--result-file", result, "--git-url", "https://example.invalid/x.git", "--git-commit", "main")
	if r := readReport(t, result); err == nil || r.Reason != source.ReasonInvalidSpec || r.Field != source.FieldCommit {
		t.Errorf("--git-commit main: err %v, report %+v; want InvalidSpec of the commit", err, r)
	}
}
