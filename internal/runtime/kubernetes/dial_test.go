package kubernetes

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/internal/agent/auth"
	"github.com/stackyard/stackyard/test/testenv"
)

// startKubernetesAgent runs `stackyard agent serve --auth kubernetes` for
// the Workspace namespace/name against the test control plane, as a pod's
// agent would run against its cluster, and returns its address.
func startKubernetesAgent(t *testing.T, namespace, name string) string {
	t.Helper()
	bin := stackyard(t)
	user, err := testEnv(t).Environment.AddUser(envtest.User{Name: "agent", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(dir, "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "Pulumi.yaml"), []byte("name: p\nruntime: yaml\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "agent", "serve", "--workspace", project, "--listen", "127.0.0.1:0",
		"--auth", "kubernetes", "--workspace-namespace", namespace, "--workspace-name", name)
	cmd.Env = []string{"KUBECONFIG=" + filepath.Join(dir, "kubeconfig"), "HOME=" + dir,
		"PATH=" + testenv.BinDir() + string(os.PathListSeparator) + os.Getenv("PATH"), "PULUMI_HOME=" + filepath.Join(dir, "home")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the agent's address: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return strings.TrimSpace(line)
}

// TestDialKubernetesAuth checks the whole Kubernetes authentication path:
// the runtime mints a token for the operator's service account and the
// Workspace's audience, and a real agent in --auth kubernetes mode accepts
// it once RBAC lets that account use the workspace.
func TestDialKubernetesAuth(t *testing.T) {
	ns := newNamespace(t)
	c := testEnv(t).Client
	if err := c.Create(ctx(t), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "operator", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	rt := newTestRuntime(t, ns)
	ws := createWorkspace(t, ns, nil)

	// Dial mints (and caches) the token; the Service name does not resolve
	// here, so calls go to a real agent on loopback with the same
	// credentials.
	conn, err := rt.Dial(ctx(t), ws)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	_ = conn.Close()
	addr := startKubernetesAgent(t, ns, ws.Name)
	call := func(audience string) error {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithPerRPCCredentials(rt.tokens.perRPC(audience)))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		_, err = agentpb.NewAutomationServiceClient(cc).PulumiVersion(ctx(t), &agentpb.PulumiVersionRequest{})
		return err
	}

	if err := call(auth.WorkspaceAudience(ns, ws.Name)); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("call without RBAC: %v, want PermissionDenied", err)
	}
	if err := call(auth.WorkspaceAudience(ns, "other")); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("call with another workspace's token: %v, want Unauthenticated", err)
	}

	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "use-ws", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"auto.pulumi.com"}, Resources: []string{"workspaces/rpc"},
			ResourceNames: []string{ws.Name}, Verbs: []string{"use"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "use-ws", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "operator", Namespace: ns}},
	}
	if err := c.Create(ctx(t), role); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx(t), binding); err != nil {
		t.Fatal(err)
	}
	// The agent remembers a refusal for a few seconds.
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := call(auth.WorkspaceAudience(ns, ws.Name))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("call with RBAC: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
