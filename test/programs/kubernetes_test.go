package programs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/programs/kubeprogram"
	"github.com/stackyard/stackyard/test/testenv"
)

// TestKubernetesProgram deploys a YAML program of Pulumi's Kubernetes
// provider (a Namespace, a ConfigMap and a Deployment) with the local
// runtime. The program acts as a ServiceAccount of its own, through a
// kubeconfig in a secret config value, as a program in a workspace pod
// acts as the Stack's ServiceAccount:
//   - without the RBAC it needs, the update fails and the Stack names the
//     ServiceAccount and the missing right;
//   - granted the RBAC, the objects appear;
//   - a new revision changes the ConfigMap and rolls the Deployment (a new
//     pod template);
//   - deleting the Stack, with destroyOnFinalize, deletes them.
//
// The test API server runs no controllers, so the program skips the
// provider's await logic (pulumi.com/skipAwait) and no pod runs; make
// test-cluster runs the same program on a real node, waits included.
func TestKubernetesProgram(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t, "kube-program-")
	app := ns + "-app"

	token, err := testenv.UserToken(ctx, env.Client, ns, "deployer")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := kubeconfigFor(t, token)
	if err := env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer-kubeconfig"},
		StringData: map[string]string{"kubeconfig": kubeconfig},
	}); err != nil {
		t.Fatal(err)
	}

	repo := gitserver.New(t).CreateRepo("web")
	v1 := repo.Commit("main", map[string]string{"Pulumi.yaml": kubeprogram.Project("hello", true)})
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	stack := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: shared.StackSpec{
			Stack:   "dev",
			Backend: "file://" + state,
			Config: map[string]apiextensionsv1.JSON{
				"web:namespace": {Raw: []byte(fmt.Sprintf("%q", app))},
			},
			SecretRefs: map[string]shared.ResourceRef{"kubernetes:kubeconfig": {
				SelectorType:     shared.ResourceSelectorSecret,
				ResourceSelector: shared.ResourceSelector{SecretRef: &shared.SecretSelector{Name: "deployer-kubeconfig", Key: "kubeconfig"}},
			}},
			GitSource:         &shared.GitSource{ProjectRepo: repo.URL, Commit: v1},
			DestroyOnFinalize: true,
		},
	}
	if err := env.Client.Create(ctx, stack); err != nil {
		t.Fatal(err)
	}

	// No RBAC: the provider is refused, and the Stack says by whom and
	// what, in its last update and in the condition that says what it does
	// next (Reconciling while it retries, Stalled after three failures).
	// The provider applies server-side: even a create is a patch.
	deployer := "system:serviceaccount:" + ns + ":deployer"
	refused := And(ContainSubstring(deployer), ContainSubstring(`cannot patch resource "namespaces"`))
	waitStack(t, stack, 3*time.Minute, func(g Gomega, s *pulumiv1.Stack) {
		g.Expect(s.Status.LastUpdate).NotTo(BeNil())
		g.Expect(s.Status.LastUpdate.State).To(Equal(shared.FailedStackStateMessage))
		g.Expect(s.Status.LastUpdate.Message).To(refused)
		g.Expect(apimeta.IsStatusConditionFalse(s.Status.Conditions, pulumiv1.ReadyCondition)).To(BeTrue())
		var next []string
		for _, c := range s.Status.Conditions {
			if (c.Type == pulumiv1.StalledCondition || c.Type == pulumiv1.ReconcilingCondition) && c.Status == metav1.ConditionTrue {
				next = append(next, c.Message)
			}
		}
		g.Expect(next).To(ConsistOf(refused))
	})
	t.Logf("without RBAC: %s", stack.Status.LastUpdate.Message)

	grant(t, ns, "deployer")
	requestReconcile(t, stack)
	waitStack(t, stack, 3*time.Minute, func(g Gomega, s *pulumiv1.Stack) {
		g.Expect(s.Status.LastUpdate).NotTo(BeNil())
		g.Expect(s.Status.LastUpdate.State).To(Equal(shared.SucceededStackStateMessage))
		g.Expect(s.Status.LastUpdate.LastSuccessfulCommit).To(Equal(v1))
		g.Expect(s.Status.Outputs).To(HaveKey("namespace"))
	})
	firstConfigMap := output(t, stack, "configMap")
	var cm corev1.ConfigMap
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: app, Name: firstConfigMap}, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["greeting"] != "hello" {
		t.Errorf("ConfigMap data = %v, want greeting=hello", cm.Data)
	}
	var dep appsv1.Deployment
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: app, Name: "web"}, &dep); err != nil {
		t.Fatal(err)
	}
	firstTemplate := dep.Spec.Template.Annotations[kubeprogram.TemplateAnnotation]

	// A new revision: the greeting is in the pod template, so the
	// Deployment rolls.
	v2 := repo.Commit("main", map[string]string{"Pulumi.yaml": kubeprogram.Project("bonjour", true)})
	patch := client.MergeFrom(stack.DeepCopy())
	stack.Spec.Commit = v2
	if err := env.Client.Patch(ctx, stack, patch); err != nil {
		t.Fatal(err)
	}
	waitStack(t, stack, 3*time.Minute, func(g Gomega, s *pulumiv1.Stack) {
		g.Expect(s.Status.LastUpdate).NotTo(BeNil())
		g.Expect(s.Status.LastUpdate.LastSuccessfulCommit).To(Equal(v2))
	})
	secondConfigMap := output(t, stack, "configMap")
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: app, Name: secondConfigMap}, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["greeting"] != "bonjour" || secondConfigMap == firstConfigMap {
		t.Errorf("ConfigMap %s data after the change = %v, want greeting=bonjour in a new ConfigMap", secondConfigMap, cm.Data)
	}
	var old corev1.ConfigMap
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: app, Name: firstConfigMap}, &old); !apierrors.IsNotFound(err) {
		t.Errorf("the replaced ConfigMap %s: %v, want it deleted", firstConfigMap, err)
	}
	var rolled appsv1.Deployment
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: app, Name: "web"}, &rolled); err != nil {
		t.Fatal(err)
	}
	if rolled.Generation <= dep.Generation || rolled.Spec.Template.Annotations[kubeprogram.TemplateAnnotation] == firstTemplate ||
		rolled.Spec.Template.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name != secondConfigMap {
		t.Errorf("the Deployment did not roll: generation %d -> %d, template annotation %q -> %q", dep.Generation, rolled.Generation,
			firstTemplate, rolled.Spec.Template.Annotations[kubeprogram.TemplateAnnotation])
	}

	// destroyOnFinalize: deleting the Stack deletes what it made. With no
	// controllers to finish the deletions, each object is deleted or being
	// deleted.
	if err := env.Client.Delete(ctx, stack); err != nil {
		t.Fatal(err)
	}
	NewWithT(t).Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(stack), stack)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Stack is gone")
	}, 3*time.Minute, 250*time.Millisecond).Should(Succeed(), func() string { return describeStack(stack) })
	for _, obj := range []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "web"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: secondConfigMap}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: app}},
	} {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if err == nil && obj.GetDeletionTimestamp() == nil {
			t.Errorf("%T %s is still there after the destroy", obj, obj.GetName())
		} else if err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	}
}

// output is the Stack's string output name.
func output(t *testing.T, stack *pulumiv1.Stack, name string) string {
	t.Helper()
	raw, ok := stack.Status.Outputs[name]
	var v string
	if !ok || json.Unmarshal(raw.Raw, &v) != nil || v == "" {
		t.Fatalf("the Stack has no string output %q: %v", name, stack.Status.Outputs)
	}
	return v
}

// kubeconfigFor is a kubeconfig for the test API server that presents
// token, and nothing else.
func kubeconfigFor(t *testing.T, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	cfg.AuthInfos["deployer"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "deployer"}
	cfg.CurrentContext = "test"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// grant gives the ServiceAccount ns/name what the program needs, as a
// cluster administrator would: Namespaces are cluster-scoped, and the
// ConfigMap and Deployment live in the namespace the program creates.
func grant(t *testing.T, ns, name string) {
	t.Helper()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ns + ":" + name},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces", "configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := env.Client.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
}

// requestReconcile asks for the Stack to be reconciled now, past its
// retry cooldown, as `kubectl annotate` would.
func requestReconcile(t *testing.T, stack *pulumiv1.Stack) {
	t.Helper()
	patch := client.MergeFrom(stack.DeepCopy())
	metav1.SetMetaDataAnnotation(&stack.ObjectMeta, shared.ReconcileRequestAnnotation, time.Now().Format(time.RFC3339Nano))
	if err := env.Client.Patch(context.Background(), stack, patch); err != nil {
		t.Fatal(err)
	}
}

// waitStack polls the Stack until check passes.
func waitStack(t *testing.T, stack *pulumiv1.Stack, timeout time.Duration, check func(Gomega, *pulumiv1.Stack)) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(stack), stack)).To(Succeed())
		check(g, stack)
	}, timeout, 250*time.Millisecond).Should(Succeed(), func() string { return describeStack(stack) })
}

func describeStack(stack *pulumiv1.Stack) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Stack %s/%s generation %d:\n", stack.Namespace, stack.Name, stack.Generation)
	for _, c := range stack.Status.Conditions {
		fmt.Fprintf(&b, "  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	if u := stack.Status.LastUpdate; u != nil {
		fmt.Fprintf(&b, "  last update %s %s: %s\n", u.Name, u.State, u.Message)
	}
	fmt.Fprintf(&b, "operator log (tail):\n%s", tail(logs.String(), 6000))
	return b.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
