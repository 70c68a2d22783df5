//go:build cluster

package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/stackyard/stackyard/test/gitserver"
)

var (
	stackGVR     = schema.GroupVersionResource{Group: "pulumi.com", Version: "v1", Resource: "stacks"}
	workspaceGVR = schema.GroupVersionResource{Group: "auto.pulumi.com", Version: "v1alpha1", Resource: "workspaces"}
)

const (
	release       = "stackyard"
	releaseNS     = "stackyard-system"
	agentHomeUser = 65532 // the user the agent image's home belongs to
	passphrase    = "cluster-e2e"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func kubeconfigPath() string {
	if p := os.Getenv("KUBECONFIG"); p != "" {
		return p
	}
	return filepath.Join(clusterDir(), "kubeconfig")
}

func clusterDir() string {
	if d := os.Getenv("CLUSTER_DIR"); d != "" {
		return d
	}
	return "/tmp/stackyard-cluster"
}

// imageTags reads dist/images/digests.txt: repository -> tag.
func imageTags(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(t), "dist", "images", "digests.txt"))
	if err != nil {
		t.Fatalf("no dist/images/digests.txt (make images): %v", err)
	}
	defer f.Close()
	tags := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		ref, _, _ := strings.Cut(strings.TrimSpace(sc.Text()), "@")
		i := strings.LastIndex(ref, ":")
		if i < 0 {
			continue
		}
		tags[ref[:i]] = ref[i+1:]
	}
	return tags
}

// helm runs bin/helm against the cluster.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot(t), "bin", "helm"), append(args, "--kubeconfig", kubeconfigPath())...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// nodeIP is the address the API server is reached at, the node's own.
func nodeIP(t *testing.T) string {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	return u.Hostname()
}

// serveGitOnNode fronts the loopback git server with a reverse proxy on the
// node's IP, which pods reach.
func serveGitOnNode(t *testing.T, gs *gitserver.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(nodeIP(t), "0"))
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(gs.URL)
	srv := &http.Server{Handler: httputil.NewSingleHostReverseProxy(target), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

func program(greeting string) map[string]string {
	return map[string]string{"Pulumi.yaml": "name: clustere2e\nruntime: yaml\noutputs:\n  greeting: " + greeting + "\n  joined:\n    fn::join: [\"-\", [\"a\", \"" + greeting + "\"]]\n"}
}

// TestOperatorEndToEnd installs the chart, brings a Stack from a git
// repository to Ready through a real workspace pod, updates it, waits for
// the pod to go idle, deletes the Stack (destroyOnFinalize) and uninstalls.
func TestOperatorEndToEnd(t *testing.T) {
	tags := imageTags(t)
	tag := tags["ghcr.io/stackyard/stackyard"]
	agentTag := tags["ghcr.io/stackyard/stackyard-agent"]
	cs := client(t)
	if tag == "" || agentTag == "" || nodeImage(t, cs, "ghcr.io/stackyard/stackyard-agent:") == "" {
		t.Fatal("the operator and agent images are not on the node (make images, then restart the cluster)")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx := t.Context()
	start := time.Now()
	step := func(format string, args ...any) {
		t.Logf("[%5.1fs] %s", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}

	// ---- install --------------------------------------------------------
	chart := filepath.Join(repoRoot(t), "deploy", "helm", "stackyard")
	helm(t, "install", release, chart, "--namespace", releaseNS, "--create-namespace",
		"--set", "image.repository=ghcr.io/stackyard/stackyard,image.tag="+tag+",image.pullPolicy=Never",
		"--set", "idleAfter=20s",
		"--wait", "--timeout", "3m")
	uninstalled := false
	t.Cleanup(func() {
		if t.Failed() {
			dumpOperator(t, cs)
		}
		if !uninstalled {
			cmd := exec.Command(filepath.Join(repoRoot(t), "bin", "helm"), "uninstall", release, "--namespace", releaseNS, "--kubeconfig", kubeconfigPath(), "--wait")
			_ = cmd.Run()
		}
	})
	step("chart installed")

	// ---- the Stack's namespace, service account and state ----------------
	ns := namespace(t, cs)
	_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "pulumi"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The Pulumi state outlives the pod (it goes when idle): a host
	// directory mounted into it.
	stateDir, err := os.MkdirTemp(clusterDir(), "e2e-state-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(stateDir, 0o777); err != nil {
		t.Fatal(err)
	}

	// ---- the git repository ---------------------------------------------
	gs := gitserver.New(t)
	repo := gs.CreateRepo("app")
	commit1 := repo.Commit("main", program("hello-one"))
	repoURL := serveGitOnNode(t, gs) + "/app.git"
	step("git repository at %s, commit %s", repoURL, commit1)

	stack := stackObject(ns, repoURL, commit1, "stack-e2e", "ghcr.io/stackyard/stackyard-agent:"+agentTag, stateDir)
	if _, err := dyn.Resource(stackGVR).Namespace(ns).Create(ctx, stack, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// ---- the agent's TokenReview, with its pod's projected token ---------
	// Without system:auth-delegator the agent may not review the
	// operator's token, and says so; bound, the same pod lets it in.
	waitWorkspaceMessage(t, dyn, ns, "stack-e2e", 3*time.Minute, "may not create tokenreviews")
	step("the agent refused to serve without system:auth-delegator (TokenReview forbidden)")
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-pulumi-auth-delegator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:auth-delegator"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "pulumi", Namespace: ns}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
	pod0 := workspacePod(t, cs, ns, "stack-e2e")

	// ---- first update: Ready through a real pod ------------------------
	waitStack(t, dyn, ns, "stack-e2e", 6*time.Minute, "hello-one")
	pod1 := workspacePod(t, cs, ns, "stack-e2e")
	step("Stack Ready with greeting hello-one through pod %s (uid %s, node %s)", pod1.Name, pod1.UID, pod1.Spec.NodeName)
	if pod1.UID != pod0.UID {
		t.Errorf("the pod that refused the operator was replaced (%s, then %s): the TokenReview check is not shown to pass in the same pod", pod0.UID, pod1.UID)
	}
	// The operator called the agent, so the TokenReview and the
	// SubjectAccessReview (use workspaces/rpc) passed with the operator's
	// token reviewed by the pod's own projected token.

	// ---- second update: a new commit -------------------------------------
	commit2 := repo.Commit("main", program("hello-two"))
	patch := fmt.Sprintf(`{"spec":{"commit":%q}}`, commit2)
	if _, err := dyn.Resource(stackGVR).Namespace(ns).Patch(ctx, "stack-e2e", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStack(t, dyn, ns, "stack-e2e", 5*time.Minute, "hello-two")
	pod2 := workspacePod(t, cs, ns, "stack-e2e")
	// The commit travels in the init container's flags, so a new one
	// changes the StatefulSet's template and rolls the pod
	// (docs/architecture.md, the kubernetes runtime).
	if pod2.UID == pod1.UID {
		t.Errorf("a new commit should roll the workspace pod; %s kept uid %s", pod2.Name, pod2.UID)
	}
	step("second update (commit %s) Ready through a new pod %s (uid %s)", commit2, pod2.Name, pod2.UID)

	// ---- idle: the pod goes, the StatefulSet stays at zero ----------------
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "auto.pulumi.com/workspace-name=stack-e2e"})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("the workspace pod did not go when idle: %v", err)
	}
	sts, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "stack-e2e-workspace", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	step("idle: no workspace pod, StatefulSet replicas %d", *sts.Spec.Replicas)

	// ---- delete with destroyOnFinalize -------------------------------------
	if err := dyn.Resource(stackGVR).Namespace(ns).Delete(ctx, "stack-e2e", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(stackGVR).Namespace(ns).Get(ctx, "stack-e2e", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		s, _ := dyn.Resource(stackGVR).Namespace(ns).Get(ctx, "stack-e2e", metav1.GetOptions{})
		t.Fatalf("the Stack was not finalized: %v\n%s", err, toYAML(s))
	}
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, e1 := dyn.Resource(workspaceGVR).Namespace(ns).Get(ctx, "stack-e2e", metav1.GetOptions{})
		_, e2 := cs.AppsV1().StatefulSets(ns).Get(ctx, "stack-e2e-workspace", metav1.GetOptions{})
		_, e3 := cs.CoreV1().Services(ns).Get(ctx, "stack-e2e-workspace", metav1.GetOptions{})
		return apierrors.IsNotFound(e1) && apierrors.IsNotFound(e2) && apierrors.IsNotFound(e3), nil
	})
	if err != nil {
		t.Fatalf("the Workspace, StatefulSet or Service outlived the Stack: %v", err)
	}
	if n, err := stateResources(stateDir, "clustere2e", "stack-e2e"); err != nil || n != 0 {
		t.Errorf("after destroyOnFinalize the stack's state should hold no resources: %d resources, %v", n, err)
	}
	step("Stack finalized, its state destroyed (%d state files)", countState(stateDir))

	// ---- uninstall -------------------------------------------------------
	helm(t, "uninstall", release, "--namespace", releaseNS, "--wait", "--timeout", "2m")
	uninstalled = true
	// Pods go after their owners, through the garbage collector and their
	// grace period (a workspace pod's is 60s).
	var left []string
	_ = wait.PollUntilContextTimeout(ctx, 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		left = leftovers(t, cs)
		return len(left) == 0, nil
	})
	if len(left) > 0 {
		t.Errorf("uninstall left operator-owned objects behind:\n%s", strings.Join(left, "\n"))
	}
	crds, err := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).Get(ctx, "stacks.pulumi.com", metav1.GetOptions{})
	if err != nil || crds == nil {
		t.Errorf("the CRDs should stay (crds.keep): %v", err)
	}
	step("uninstalled; only the CRDs remain")
}

func stackObject(ns, repoURL, commit, name, agentImage, stateDir string) *unstructured.Unstructured {
	spec := map[string]any{
		"stack":              name,
		"backend":            "file:///state",
		"projectRepo":        repoURL,
		"commit":             commit,
		"destroyOnFinalize":  true,
		"serviceAccountName": "pulumi",
		"envRefs": map[string]any{
			"PULUMI_CONFIG_PASSPHRASE": map[string]any{"type": "Literal", "literal": map[string]any{"value": passphrase}},
		},
		"workspaceTemplate": map[string]any{"spec": map[string]any{
			"image":           agentImage,
			"imagePullPolicy": "Never",
			// The restricted profile runs as 1000 (the pulumi -nonroot
			// images' user) but the agent image's home belongs to 65532.
			"podTemplate": map[string]any{"spec": map[string]any{
				"securityContext": map[string]any{"runAsUser": agentHomeUser, "runAsGroup": agentHomeUser, "fsGroup": agentHomeUser},
				"containers": []any{map[string]any{
					"name":         "pulumi",
					"volumeMounts": []any{map[string]any{"name": "state", "mountPath": "/state"}},
				}},
				"volumes": []any{map[string]any{"name": "state", "hostPath": map[string]any{"path": stateDir, "type": "Directory"}}},
			}},
		}},
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pulumi.com/v1",
		"kind":       "Stack",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       spec,
	}}
}

// waitStack waits for the Stack's Ready condition with output greeting.
func waitStack(t *testing.T, dyn dynamic.Interface, ns, name string, timeout time.Duration, greeting string) {
	t.Helper()
	var last *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(t.Context(), 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		s, err := dyn.Resource(stackGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = s
		conds, _, _ := unstructured.NestedSlice(s.Object, "status", "conditions")
		ready := false
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Ready" && m["status"] == "True" {
				ready = true
			}
		}
		out, _, _ := unstructured.NestedFieldNoCopy(s.Object, "status", "outputs", "greeting")
		return ready && out == greeting, nil
	})
	if err != nil {
		t.Fatalf("Stack %s/%s not Ready with greeting %q: %v\n%s", ns, name, greeting, err, toYAML(last))
	}
}

func workspacePod(t *testing.T, cs kubernetes.Interface, ns, ws string) corev1.Pod {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "auto.pulumi.com/workspace-name=" + ws})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("want one workspace pod, got %d", len(pods.Items))
	}
	return pods.Items[0]
}

func podLogs(t *testing.T, cs kubernetes.Interface, ns, pod, container string) string {
	t.Helper()
	raw, err := cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(t.Context())
	if err != nil {
		return fmt.Sprintf("(logs: %v)", err)
	}
	return string(raw)
}

// stateResources counts the resources in a file backend's stack checkpoint.
func stateResources(dir, project, stack string) (int, error) {
	raw, err := os.ReadFile(filepath.Join(dir, ".pulumi", "stacks", project, stack+".json"))
	if err != nil {
		return -1, err
	}
	var cp struct {
		Checkpoint struct {
			Latest struct {
				Resources []json.RawMessage `json:"resources"`
			} `json:"latest"`
		} `json:"checkpoint"`
	}
	if err := json.Unmarshal(raw, &cp); err != nil {
		return -1, err
	}
	return len(cp.Checkpoint.Latest.Resources), nil
}

func countState(dir string) int {
	n := 0
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && strings.HasSuffix(p, ".json") {
			n++
		}
		return nil
	})
	return n
}

// waitWorkspaceMessage waits for a condition of the Workspace whose
// message holds substr.
func waitWorkspaceMessage(t *testing.T, dyn dynamic.Interface, ns, name string, timeout time.Duration, substr string) {
	t.Helper()
	var last *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(t.Context(), 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		w, err := dyn.Resource(workspaceGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = w
		conds, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if msg, _ := m["message"].(string); strings.Contains(msg, substr) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("Workspace %s/%s: no condition says %q: %v\n%s", ns, name, substr, err, toYAML(last))
	}
}

// leftovers lists objects of the release, and workspace objects, that
// outlived the uninstall.
func leftovers(t *testing.T, cs kubernetes.Interface) []string {
	t.Helper()
	ctx := t.Context()
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release}
	var left []string
	add := func(kind string, names []string, err error) {
		if err != nil {
			left = append(left, fmt.Sprintf("%s: list: %v", kind, err))
		}
		for _, n := range names {
			left = append(left, kind+" "+n)
		}
	}
	var names []string
	if l, err := cs.AppsV1().Deployments("").List(ctx, sel); err == nil {
		names = nil
		for _, o := range l.Items {
			names = append(names, o.Namespace+"/"+o.Name)
		}
		add("Deployment", names, nil)
	} else {
		add("Deployment", nil, err)
	}
	if l, err := cs.CoreV1().Services("").List(ctx, sel); err == nil {
		names = nil
		for _, o := range l.Items {
			names = append(names, o.Namespace+"/"+o.Name)
		}
		add("Service", names, nil)
	}
	if l, err := cs.CoreV1().ServiceAccounts("").List(ctx, sel); err == nil {
		names = nil
		for _, o := range l.Items {
			names = append(names, o.Namespace+"/"+o.Name)
		}
		add("ServiceAccount", names, nil)
	}
	if l, err := cs.RbacV1().ClusterRoles().List(ctx, sel); err == nil {
		names = nil
		for _, o := range l.Items {
			names = append(names, o.Name)
		}
		add("ClusterRole", names, nil)
	}
	if l, err := cs.RbacV1().ClusterRoleBindings().List(ctx, sel); err == nil {
		names = nil
		for _, o := range l.Items {
			names = append(names, o.Name)
		}
		add("ClusterRoleBinding", names, nil)
	}
	if l, err := cs.RbacV1().Roles("").List(ctx, sel); err == nil {
		names = nil
		for _, o := range l.Items {
			names = append(names, o.Namespace+"/"+o.Name)
		}
		add("Role", names, nil)
	}
	if l, err := cs.RbacV1().RoleBindings("").List(ctx, sel); err == nil {
		names = nil
		for _, o := range l.Items {
			names = append(names, o.Namespace+"/"+o.Name)
		}
		add("RoleBinding", names, nil)
	}
	if l, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, sel); err == nil {
		names = nil
		for _, o := range l.Items {
			names = append(names, o.Name)
		}
		add("ValidatingAdmissionPolicy", names, nil)
	}
	if l, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().List(ctx, sel); err == nil {
		names = nil
		for _, o := range l.Items {
			names = append(names, o.Name)
		}
		add("ValidatingAdmissionPolicyBinding", names, nil)
	}
	// The operator's own: workspace StatefulSets and Services, and the
	// leader election Lease.
	ws := metav1.ListOptions{LabelSelector: "auto.pulumi.com/component"}
	if l, err := cs.AppsV1().StatefulSets("").List(ctx, ws); err == nil {
		names = nil
		for _, o := range l.Items {
			names = append(names, o.Namespace+"/"+o.Name)
		}
		add("StatefulSet", names, nil)
	}
	if l, err := cs.CoreV1().Pods("").List(ctx, ws); err == nil {
		names = nil
		for _, o := range l.Items {
			names = append(names, o.Namespace+"/"+o.Name)
		}
		add("Pod", names, nil)
	}
	if l, err := cs.CoreV1().Pods(releaseNS).List(ctx, metav1.ListOptions{}); err == nil {
		names = nil
		for _, o := range l.Items {
			names = append(names, o.Namespace+"/"+o.Name)
		}
		add("Pod", names, nil)
	}
	return left
}

func dumpOperator(t *testing.T, cs kubernetes.Interface) {
	pods, err := cs.CoreV1().Pods(releaseNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		raw, _ := cs.CoreV1().Pods(releaseNS).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(context.Background())
		lines := strings.Split(string(raw), "\n")
		if len(lines) > 80 {
			lines = lines[len(lines)-80:]
		}
		t.Logf("operator pod %s (%s):\n%s", p.Name, describe(&p), strings.Join(lines, "\n"))
	}
}

func toYAML(o any) string {
	if o == nil {
		return "(none)"
	}
	b, err := json.Marshal(o)
	if err != nil {
		return err.Error()
	}
	y, err := yaml.JSONToYAML(b)
	if err != nil {
		return string(b)
	}
	return string(y)
}
