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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	kubernetesruntime "github.com/stackyard/stackyard/internal/runtime/kubernetes"
	"github.com/stackyard/stackyard/test/gitserver"
)

var (
	stackGVR     = schema.GroupVersionResource{Group: "pulumi.com", Version: "v1", Resource: "stacks"}
	workspaceGVR = schema.GroupVersionResource{Group: "auto.pulumi.com", Version: "v1alpha1", Resource: "workspaces"}
)

const passphrase = "cluster-e2e"

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

// TestOperatorEndToEnd installs the operator, brings a Stack from a git
// repository to Ready through a real workspace pod, updates it, waits for
// the pod to go idle, deletes the Stack (destroyOnFinalize) and uninstalls:
// once with the Helm chart and once with the kustomization.
//
// The Stacks keep the default, restricted, security profile, which runs
// the workspace pod as 1000; the two runs use the two kinds of workspace
// image it must serve: one laid out like Pulumi's -nonroot images (a user
// 1000 with its own home) and stackyard's agent image (a user 65532 in
// /etc/passwd, and a HOME and USER for any other).
func TestOperatorEndToEnd(t *testing.T) {
	for _, tc := range []struct {
		inst       installer
		agentImage func(t *testing.T, img images) string
	}{
		{helmInstaller, pulumiStyleImage},
		{kustomizeInstaller, func(_ *testing.T, img images) string { return img.agent() }},
	} {
		t.Run(tc.inst.name, func(t *testing.T) { testEndToEnd(t, tc.inst, tc.agentImage) })
	}
}

// begin starts a test on the cluster: the images checked, a namespace of
// its own, and, should the test fail, the operator's and the workspace
// pods' logs dumped and whatever it installed torn down; the CRDs go in
// any case.
func begin(t *testing.T) (c *cluster, img images, ns string, step func(format string, args ...any)) {
	t.Helper()
	c = connect(t)
	img = requireImages(t, c)
	step = stepper(t)
	t.Cleanup(func() { removeCRDs(t, c) })
	ns = namespace(t, c.cs)
	t.Cleanup(func() {
		if t.Failed() {
			dumpOperator(t, c.cs)
			dumpWorkspacePods(t, c.cs, ns)
			tearDown(t, c, ns)
		}
	})
	return c, img, ns, step
}

func testEndToEnd(t *testing.T, inst installer, agentImage func(t *testing.T, img images) string) {
	c := connect(t)
	img := requireImages(t, c)
	agent := agentImage(t, img)
	ctx := t.Context()
	step := stepper(t)
	t.Cleanup(func() { removeCRDs(t, c) })

	// ---- install, with the workspace ServiceAccount in the Stack's
	// namespace ------------------------------------------------------------
	ns := namespace(t, c.cs)
	t.Cleanup(func() {
		if t.Failed() {
			dumpOperator(t, c.cs)
			dumpWorkspacePods(t, c.cs, ns)
			tearDown(t, c, ns)
		}
	})
	installed := inst.install(t, img, ns)
	step("installed with %s (%d objects)", inst.name, len(installed.objects))

	// The Pulumi state outlives the pod (it goes when idle): a host
	// directory mounted into it, writable by the pod's user.
	stateDir := hostStateDir(t, "e2e-state-")

	// ---- the git repository ---------------------------------------------
	gs := gitserver.New(t)
	repo := gs.CreateRepo("app")
	commit1 := repo.Commit("main", program("hello-one"))
	repoURL := serveGitOnNode(t, gs) + "/app.git"
	step("git repository at %s, commit %s", repoURL, commit1)

	stack := stackObject(ns, repoURL, commit1, "stack-e2e", agent, stateDir)
	if _, err := c.dyn.Resource(stackGVR).Namespace(ns).Create(ctx, stack, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// ---- first update: Ready through a real pod ------------------------
	// The agent serves only once its TokenReview and SubjectAccessReview
	// of the operator's token pass, made with its pod's projected token:
	// the workspace ServiceAccount's system:auth-delegator binding works.
	waitStack(t, c, ns, "stack-e2e", 6*time.Minute, "hello-one")
	pod1 := workspacePod(t, c.cs, ns, "stack-e2e")
	step("Stack Ready with greeting hello-one through pod %s (uid %s, image %s)", pod1.Name, pod1.UID, agent)
	// The pod runs the lean agent its init container copied, not a
	// copy of stackyard standing in for it.
	if logs := podLogs(t, c.cs, ns, pod1.Name, "pulumi"); !strings.Contains(logs, "program=github.com/stackyard/stackyard/cmd/stackyard-agent") {
		t.Errorf("the workspace pod's agent is not the lean one; its log:\n%s\ninit: %s", logs, podLogs(t, c.cs, ns, pod1.Name, "init"))
	}
	// The restricted profile, as it comes: the pod runs as the profile's
	// user, whatever the image's.
	if sc := pod1.Spec.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != kubernetesruntime.NonRootUser {
		t.Errorf("the workspace pod should run as %d (the restricted profile): %+v", kubernetesruntime.NonRootUser, sc)
	}

	// ---- second update: a new commit -------------------------------------
	commit2 := repo.Commit("main", program("hello-two"))
	patch := fmt.Sprintf(`{"spec":{"commit":%q}}`, commit2)
	if _, err := c.dyn.Resource(stackGVR).Namespace(ns).Patch(ctx, "stack-e2e", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStack(t, c, ns, "stack-e2e", 5*time.Minute, "hello-two")
	pod2 := workspacePod(t, c.cs, ns, "stack-e2e")
	// The commit travels in the init container's flags, so a new one
	// changes the StatefulSet's template and rolls the pod
	// (docs/architecture.md, the kubernetes runtime).
	if pod2.UID == pod1.UID {
		t.Errorf("a new commit should roll the workspace pod; %s kept uid %s", pod2.Name, pod2.UID)
	}
	step("second update (commit %s) Ready through a new pod %s (uid %s)", commit2, pod2.Name, pod2.UID)

	// ---- idle: the pod goes, the StatefulSet stays at zero ----------------
	// Two updates in a row keep the agent warm for half as long again as
	// the gap between them (workspace.warmFor), then it goes.
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 6*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "auto.pulumi.com/workspace-name=stack-e2e"})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("the workspace pod did not go when idle: %v", err)
	}
	sts, err := c.cs.AppsV1().StatefulSets(ns).Get(ctx, "stack-e2e-workspace", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *sts.Spec.Replicas != 0 {
		t.Errorf("idle StatefulSet has %d replicas, want 0", *sts.Spec.Replicas)
	}
	step("idle: no workspace pod, StatefulSet replicas %d", *sts.Spec.Replicas)

	// ---- delete with destroyOnFinalize -------------------------------------
	if err := c.dyn.Resource(stackGVR).Namespace(ns).Delete(ctx, "stack-e2e", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.dyn.Resource(stackGVR).Namespace(ns).Get(ctx, "stack-e2e", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		s, _ := c.dyn.Resource(stackGVR).Namespace(ns).Get(ctx, "stack-e2e", metav1.GetOptions{})
		t.Fatalf("the Stack was not finalized: %v\n%s", err, toYAML(s))
	}
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, e1 := c.dyn.Resource(workspaceGVR).Namespace(ns).Get(ctx, "stack-e2e", metav1.GetOptions{})
		_, e2 := c.cs.AppsV1().StatefulSets(ns).Get(ctx, "stack-e2e-workspace", metav1.GetOptions{})
		_, e3 := c.cs.CoreV1().Services(ns).Get(ctx, "stack-e2e-workspace", metav1.GetOptions{})
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
	installed.uninstall(t)
	waitNoLeftovers(t, c, installed.objects)
	leftCRDs(ctx, t, c)
	step("uninstalled; only the CRDs remain")
}

// stepper returns a logger of the test's steps, each stamped with the
// seconds since the test began.
func stepper(t *testing.T) func(format string, args ...any) {
	start := time.Now()
	return func(format string, args ...any) {
		t.Logf("[%5.1fs] %s", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
}

// hostStateDir is a new directory on the node for a file backend's state,
// which outlives the workspace pod (it goes when idle): mounted into the
// pod, and writable by the pod's user. It is removed after the test.
func hostStateDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp(clusterDir(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
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
			"image": agentImage,
			// The default (restricted) security profile; only the state
			// volume is added to the pod.
			"podTemplate": map[string]any{"spec": map[string]any{
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
func waitStack(t *testing.T, c *cluster, ns, name string, timeout time.Duration, greeting string) {
	t.Helper()
	waitStackState(t, c, ns, name, timeout, fmt.Sprintf("Ready with greeting %q", greeting), func(s *unstructured.Unstructured) bool {
		conds, _, _ := unstructured.NestedSlice(s.Object, "status", "conditions")
		ready := false
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Ready" && m["status"] == "True" {
				ready = true
			}
		}
		out, _, _ := unstructured.NestedFieldNoCopy(s.Object, "status", "outputs", "greeting")
		return ready && out == greeting
	})
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
	raw, err := cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(context.Background())
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

// dumpWorkspacePods logs the state and the logs of the workspace pods of
// ns, for a test that failed.
func dumpWorkspacePods(t *testing.T, cs kubernetes.Interface, ns string) {
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "auto.pulumi.com/component"})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		t.Logf("workspace pod %s (%s):\ninit: %s\npulumi: %s", p.Name, describe(&p),
			podLogs(t, cs, ns, p.Name, "init"), podLogs(t, cs, ns, p.Name, "pulumi"))
	}
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
