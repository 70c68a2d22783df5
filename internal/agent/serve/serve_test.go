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
