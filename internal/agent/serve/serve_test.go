package serve

import (
	"bytes"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"github.com/stackyard/stackyard/internal/agent/auth"
)

// TestAuthFlags: a bad --auth is refused before the server starts, with an
// error that names the flag; a binary without a Kubernetes client says
// which binary has one.
func TestAuthFlags(t *testing.T) {
	dir := t.TempDir()
	kube := func(string, string, logr.Logger) (auth.Authorizer, error) { return auth.NewStaticToken("t"), nil }
	for name, tc := range map[string]struct {
		kube KubernetesAuth
		args []string
		want string
	}{
		"unknown mode":          {kube, []string{"--auth", "oidc", "--no-auth=false"}, `--auth "oidc"`},
		"kubernetes, no client": {nil, []string{"--auth", AuthKubernetes, "--workspace-namespace", "ns", "--workspace-name", "ws"}, "run `stackyard agent serve`"},
		"kubernetes, no pod":    {InClusterAuth, []string{"--auth", AuthKubernetes, "--workspace-namespace", "ns", "--workspace-name", "ws"}, "not in a Kubernetes pod"},
		"kubernetes, no name":   {kube, []string{"--auth", AuthKubernetes, "--workspace-namespace", "ns"}, "--workspace-name"},
		"static, no token":      {nil, []string{"--auth", AuthStatic}, "no token"},
		"static, missing file":  {nil, []string{"--token-file", dir + "/none"}, "read --token-file"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(TokenEnv, "")
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			cmd := Command(tc.kube)
			cmd.SilenceUsage = true
			var out, stderr bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&stderr)
			cmd.SetArgs(append([]string{"--workspace", dir}, tc.args...))
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("serve %v = %v, want an error containing %q", tc.args, err, tc.want)
			}
			// The first line of stdout would be the address served.
			if out.Len() > 0 {
				t.Errorf("serve %v printed %q, want nothing (it must not serve)", tc.args, out.String())
			}
		})
	}
}

// TestAwaitSpec: a pre-started agent whose stdin closes empty exits
// quietly; one given both a spec and the flags it carries, or a bad spec,
// fails with an error that names the flag or field, and serves nothing.
// (A spec that binds changes the process's directory and environment; the
// local runtime's tests run that in real agents.)
func TestAwaitSpec(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		args  []string
		stdin string
		want  string // "" for no error
	}{
		"closed empty":       {nil, "", ""},
		"and --workspace":    {[]string{"--workspace", dir}, "", "--await-spec reads --workspace"},
		"and --token-file":   {[]string{"--token-file", dir + "/t"}, "", "--await-spec reads --token-file"},
		"relative directory": {nil, `{"dir":"x","workspace":"/w","tokenFile":"/t"}`, "spec.dir must be an absolute UTF-8 path"},
		"not a spec":         {nil, `not json`, "not JSON"},
	} {
		t.Run(name, func(t *testing.T) {
			cmd := Command(nil)
			cmd.SilenceUsage = true
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&bytes.Buffer{})
			cmd.SetIn(strings.NewReader(tc.stdin))
			cmd.SetArgs(append([]string{"--await-spec"}, tc.args...))
			err := cmd.Execute()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("serve --await-spec = %v, want a quiet exit", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("serve --await-spec %v = %v, want an error containing %q", tc.args, err, tc.want)
			}
			if out.Len() > 0 {
				t.Errorf("serve --await-spec printed %q, want nothing (it must not serve)", out.String())
			}
		})
	}
	// Without --await-spec, --workspace is required.
	cmd := Command(nil)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"--no-auth"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), `"workspace"`) {
		t.Errorf("serve without --workspace = %v, want the required flag named", err)
	}
}
