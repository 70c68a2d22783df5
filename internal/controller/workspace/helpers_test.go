package workspace_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
)

// program is a Pulumi YAML project without resources whose outputs echo
// its configuration.
const program = `name: %s
runtime: yaml
config:
  greeting:
    type: string
  token:
    type: string
    secret: true
outputs:
  greeting: ${greeting}
  token: ${token}
`

// writeProgram writes a project named name into a new directory.
func writeProgram(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte(fmt.Sprintf(program, name)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Secret values the tests look for in status, events and logs.
const (
	passphrase  = "pa55phrase-never-shown"
	secretToken = "s3cr3t-t0ken-never-shown"
)

// createBackendSecret stores the passphrase and token the workspaces read
// through secretKeyRef env vars.
func createBackendSecret(t *testing.T, ns string) {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "backend", Namespace: ns},
		StringData: map[string]string{"passphrase": passphrase, "token": secretToken},
	}
	if err := env.Client.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

// secretEnv is an env var read from the "backend" Secret.
func secretEnv(name, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "backend"}, Key: key}}}
}

// jsonValue is an inline config value.
func jsonValue(t *testing.T, v any) *apiextensionsv1.JSON {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return &apiextensionsv1.JSON{Raw: b}
}

// newWorkspace returns a Workspace over a local program with its own file
// backend, the passphrase from the Secret and a stack "dev" configured
// with a literal and a Secret-backed value.
func newWorkspace(t *testing.T, ns, name string) *autov1alpha1.Workspace {
	t.Helper()
	return &autov1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: autov1alpha1.WorkspaceSpec{
			Local: &autov1alpha1.LocalSource{Dir: writeProgram(t, name)},
			Env: []corev1.EnvVar{
				{Name: "PULUMI_BACKEND_URL", Value: "file://" + t.TempDir()},
				secretEnv("PULUMI_CONFIG_PASSPHRASE", "passphrase"),
				secretEnv("APP_TOKEN", "token"),
			},
			Stacks: []autov1alpha1.WorkspaceStack{{
				Name:   "dev",
				Create: ptrTo(true),
				Config: []autov1alpha1.ConfigItem{
					{Key: "greeting", Value: jsonValue(t, "hello")},
					{Key: "token", ValueFrom: &autov1alpha1.ConfigValueFrom{Env: "APP_TOKEN"}, Secret: ptrTo(true)},
				},
			}},
		},
	}
}

// getWS reads a Workspace.
func getWS(t *testing.T, ns, name string) *autov1alpha1.Workspace {
	t.Helper()
	ws := &autov1alpha1.Workspace{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, ws); err != nil {
		t.Fatalf("reading workspace %s: %v", name, err)
	}
	return ws
}

// describe summarizes a Workspace's status for failure messages.
func describe(ws *autov1alpha1.Workspace) string {
	s := fmt.Sprintf("generation %d observed %d address %q:", ws.Generation, ws.Status.ObservedGeneration, ws.Status.Address)
	for _, c := range ws.Status.Conditions {
		s += fmt.Sprintf(" [%s=%s %s g%d: %s]", c.Type, c.Status, c.Reason, c.ObservedGeneration, c.Message)
	}
	return s
}

// setupRevision is the source revision status.setup records, or "".
func setupRevision(ws *autov1alpha1.Workspace) string {
	if ws.Status.Setup == nil {
		return ""
	}
	return ws.Status.Setup.Revision
}

// waitServing waits until the Workspace is Ready and Active for its
// current generation, and returns it.
func waitServing(t *testing.T, ns, name string) *autov1alpha1.Workspace {
	t.Helper()
	var ws *autov1alpha1.Workspace
	eventually(t, 90*time.Second, name+" serving", func() (bool, string) {
		ws = getWS(t, ns, name)
		return ws.Serving() && ws.Status.ObservedGeneration == ws.Generation, describe(ws)
	})
	return ws
}

// waitCondition waits until condition typ of the Workspace has status and
// reason at its current generation, and returns it.
func waitCondition(t *testing.T, ns, name, typ string, status metav1.ConditionStatus, reason string) *autov1alpha1.Workspace {
	t.Helper()
	var ws *autov1alpha1.Workspace
	eventually(t, 90*time.Second, fmt.Sprintf("%s %s=%s (%s)", name, typ, status, reason), func() (bool, string) {
		ws = getWS(t, ns, name)
		c := apimeta.FindStatusCondition(ws.Status.Conditions, typ)
		return c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == ws.Generation, describe(ws)
	})
	return ws
}

// agentClient dials the Workspace's agent through the runtime.
func agentClient(t *testing.T, op *operator, ws *autov1alpha1.Workspace) agentpb.AutomationServiceClient {
	t.Helper()
	conn, err := op.rt.Dial(ctx(t), ws)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return agentpb.NewAutomationServiceClient(conn)
}

// upOutputs selects stack "dev" (without creating it), runs an up and
// returns the outputs, secrets shown.
func upOutputs(t *testing.T, c agentpb.AutomationServiceClient) map[string]*agentpb.OutputValue {
	t.Helper()
	if _, err := c.SelectStack(ctx(t), &agentpb.SelectStackRequest{StackName: "dev"}); err != nil {
		t.Fatalf("SelectStack dev: %v", err)
	}
	stream, err := c.Up(ctx(t), &agentpb.UpRequest{ShowSecrets: true})
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	for {
		msg, err := stream.Recv()
		if err != nil {
			t.Fatalf("Up stream: %v", err)
		}
		if res := msg.GetResult(); res != nil {
			if res.GetError() != nil {
				t.Fatalf("Up failed: %v", res.GetError())
			}
			return res.GetOutputs()
		}
	}
}

// createUpdate stores a pending Update of the Workspace.
func createUpdate(t *testing.T, ns, name, wsName string) *autov1alpha1.Update {
	t.Helper()
	u := &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       autov1alpha1.UpdateSpec{WorkspaceName: wsName, StackName: "dev", Type: autov1alpha1.PreviewType},
	}
	if err := env.Client.Create(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	return u
}

// completeUpdate records the Update as finished, as the Update controller
// would.
func completeUpdate(t *testing.T, u *autov1alpha1.Update) {
	t.Helper()
	u.Status.MarkSucceeded("done")
	u.Status.EndTime = metav1.Now()
	if err := env.Client.Status().Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}
