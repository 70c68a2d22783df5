//go:build cluster

package cluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stackyard/stackyard/internal/image"
	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/programs/kubeprogram"
)

// TestKubernetesProgramOnNode runs the real-world program of test/programs
// (a Namespace, a ConfigMap and a Deployment, on Pulumi's Kubernetes
// provider) on the real node with the kubernetes runtime, the provider's
// waits included. The program acts as the Stack's ServiceAccount, from
// inside its workspace pod:
//   - without the RBAC it needs, the update fails and the Stack names the
//     ServiceAccount and the missing right;
//   - with the RBAC, the objects appear and the Deployment's pod runs;
//   - a new revision rolls the Deployment;
//   - destroyOnFinalize removes them all.
func TestKubernetesProgramOnNode(t *testing.T) {
	c, img, ns, step := begin(t)
	agent := providerImage(t, img)
	ctx := t.Context()
	app := ns + "-app"
	t.Cleanup(func() {
		if t.Failed() {
			_ = c.cs.CoreV1().Namespaces().Delete(context.Background(), app, metav1.DeleteOptions{})
		}
	})
	installed := kustomizeInstaller.install(t, img, ns)
	step("installed with kustomize")

	stateDir := hostStateDir(t, "program-state-")
	gs := gitserver.New(t)
	repo := gs.CreateRepo("kube")
	v1 := repo.Commit("main", map[string]string{"Pulumi.yaml": kubeprogram.Project("hello", false)})
	repoURL := serveGitOnNode(t, gs) + "/kube.git"

	stack := programStack(t, ns, repoURL, v1, "kube", agent, stateDir, app)
	if _, err := c.dyn.Resource(stackGVR).Namespace(ns).Create(ctx, stack, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// No RBAC: the workspace pod's ServiceAccount may do nothing of what
	// the program does.
	identity := "system:serviceaccount:" + ns + ":" + workspaceSA
	waitStackState(t, c, ns, "kube", 6*time.Minute, "a failed update naming the ServiceAccount", func(s *unstructured.Unstructured) bool {
		state, _, _ := unstructured.NestedString(s.Object, "status", "lastUpdate", "state")
		msg, _, _ := unstructured.NestedString(s.Object, "status", "lastUpdate", "message")
		return state == "failed" && strings.Contains(msg, identity) && strings.Contains(msg, `cannot patch resource "namespaces"`)
	})
	step("refused without RBAC, as %s", identity)

	grantProgram(t, c, ns, workspaceSA)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"pulumi.com/reconciliation-request":%q}}}`, time.Now().Format(time.RFC3339Nano))
	if _, err := c.dyn.Resource(stackGVR).Namespace(ns).Patch(ctx, "kube", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStackState(t, c, ns, "kube", 6*time.Minute, "the first revision deployed", succeededAt(v1))
	dep := runningDeployment(t, c, app, "hello")
	step("granted: Deployment %s/web has %d available replica(s)", app, dep.Status.AvailableReplicas)

	// A new revision rolls the Deployment: the provider waits for the
	// rollout, so the update succeeds only once the new pod runs.
	v2 := repo.Commit("main", map[string]string{"Pulumi.yaml": kubeprogram.Project("bonjour", false)})
	if _, err := c.dyn.Resource(stackGVR).Namespace(ns).Patch(ctx, "kube", types.MergePatchType,
		fmt.Appendf(nil, `{"spec":{"commit":%q}}`, v2), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStackState(t, c, ns, "kube", 6*time.Minute, "the second revision deployed", succeededAt(v2))
	rolled := runningDeployment(t, c, app, "bonjour")
	if rolled.Generation <= dep.Generation {
		t.Errorf("the Deployment did not roll: generation %d, then %d", dep.Generation, rolled.Generation)
	}
	step("rolled: generation %d -> %d", dep.Generation, rolled.Generation)

	// destroyOnFinalize: the namespace the program made goes, with what
	// it holds.
	if err := c.dyn.Resource(stackGVR).Namespace(ns).Delete(ctx, "kube", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, e1 := c.dyn.Resource(stackGVR).Namespace(ns).Get(ctx, "kube", metav1.GetOptions{})
		_, e2 := c.cs.CoreV1().Namespaces().Get(ctx, app, metav1.GetOptions{})
		return apierrors.IsNotFound(e1) && apierrors.IsNotFound(e2), nil
	})
	if err != nil {
		t.Fatalf("the Stack and the namespace %s it made should be gone: %v", app, err)
	}
	step("destroyed: namespace %s is gone", app)

	installed.uninstall(t)
	waitNoLeftovers(t, c, installed.objects)
}

// programStack is stackObject for kubeprogram's program, making its
// objects in the namespace app, its pod on the node's pause image.
func programStack(t *testing.T, ns, repoURL, commit, name, agentImage, stateDir, app string) *unstructured.Unstructured {
	t.Helper()
	s := stackObject(ns, repoURL, commit, name, agentImage, stateDir)
	config := map[string]any{"web:namespace": app, "web:image": "stackyard.test/pause:1"}
	must(t, unstructured.SetNestedMap(s.Object, config, "spec", "config"))
	return s
}

// providerImage is the agent image with Pulumi's Kubernetes provider
// (bin/pulumi-resource-kubernetes) added in /usr/local/bin, where the
// engine finds it on PATH, imported into the node's containerd.
func providerImage(t *testing.T, img images) string {
	t.Helper()
	base := agentImageOf(t)
	layer, err := image.NewLayer([]image.Entry{
		image.FileFrom("/usr/local/bin/pulumi-resource-kubernetes", 0o755, filepath.Join(repoRoot(t), "bin", "pulumi-resource-kubernetes")),
	}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	withProvider, err := mutate.Append(base, mutate.Addendum{Layer: layer})
	if err != nil {
		t.Fatal(err)
	}
	return importImage(t, "stackyard.test/agent-kubernetes:"+img.tag, withProvider)
}

// grantProgram gives the ServiceAccount ns/name what the program needs,
// as a cluster administrator would: Namespaces are cluster-scoped, the
// rest lives in the namespace the program makes, and the provider watches
// ReplicaSets, Pods and Events while it waits for a rollout. The grant
// goes when the test ends.
func grantProgram(t *testing.T, c *cluster, ns, name string) {
	t.Helper()
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	read := []string{"get", "list", "watch"}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-program"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces", "configmaps"}, Verbs: all},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: all},
			{APIGroups: []string{"apps"}, Resources: []string{"replicasets"}, Verbs: read},
			{APIGroups: []string{""}, Resources: []string{"pods", "events", "persistentvolumeclaims"}, Verbs: read},
			{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: read},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	t.Cleanup(func() {
		_ = c.cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = c.cs.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	if _, err := c.cs.RbacV1().ClusterRoles().Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.cs.RbacV1().ClusterRoleBindings().Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// succeededAt is a check of a Stack whose last update succeeded at commit.
func succeededAt(commit string) func(*unstructured.Unstructured) bool {
	return func(s *unstructured.Unstructured) bool {
		state, _, _ := unstructured.NestedString(s.Object, "status", "lastUpdate", "state")
		got, _, _ := unstructured.NestedString(s.Object, "status", "lastUpdate", "lastSuccessfulCommit")
		return state == "succeeded" && got == commit
	}
}

// waitStackState polls the Stack ns/name until check passes.
func waitStackState(t *testing.T, c *cluster, ns, name string, timeout time.Duration, what string, check func(*unstructured.Unstructured) bool) {
	t.Helper()
	var last *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(t.Context(), 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		s, err := c.dyn.Resource(stackGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = s
		return check(s), nil
	})
	if err != nil {
		t.Fatalf("Stack %s/%s: waiting for %s: %v\n%s\n%s", ns, name, what, err, toYAML(last), describeNamespace(c, ns))
	}
}

// describeNamespace says, a line each, where every object of change
// management and every Workspace and Update of ns stands: what a failed
// wait for a Stack needs to be understood.
func describeNamespace(c *cluster, ns string) string {
	var b strings.Builder
	for _, gvr := range []schema.GroupVersionResource{
		promotionGVR("pipelines"), promotionGVR("releases"), promotionGVR("stages"), promotionGVR("promotions"),
		workspaceGVR, {Group: "auto.pulumi.com", Version: "v1alpha1", Resource: "updates"},
	} {
		list, err := c.dyn.Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", gvr.Resource, err)
			continue
		}
		for _, u := range list.Items {
			phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
			msg, _, _ := unstructured.NestedString(u.Object, "status", "message")
			fmt.Fprintf(&b, "%s %s: phase %q message %q", gvr.Resource, u.GetName(), phase, msg)
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok {
					fmt.Fprintf(&b, "; %v=%v %v: %v", m["type"], m["status"], m["reason"], m["message"])
				}
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// runningDeployment checks that the program's Deployment has a pod of the
// greeting's template available.
func runningDeployment(t *testing.T, c *cluster, ns, greeting string) *appsv1.Deployment {
	t.Helper()
	dep, err := c.cs.AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := dep.Spec.Template.Annotations[kubeprogram.TemplateAnnotation]; got != greeting {
		t.Errorf("the Deployment's template says %q, want %q", got, greeting)
	}
	if dep.Status.AvailableReplicas != 1 || dep.Status.UpdatedReplicas != 1 || dep.Status.ObservedGeneration != dep.Generation {
		t.Errorf("the Deployment is not rolled out: %+v", dep.Status)
	}
	return dep
}
