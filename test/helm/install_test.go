package helm_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/stackyard/stackyard/test/testenv"
)

// warnings collects the warnings the API server sends with its answers
// (Pod Security admission warns of a Deployment whose pods it would
// refuse, rather than refusing the Deployment).
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	msgs := w.msgs
	w.msgs = nil
	return msgs
}

// TestInstallUpgradeUninstall installs the chart with helm on a real API
// server the way docs/install.md tells a user of config/default to move to
// it, upgrades it to every option on, and uninstalls it: the API server
// accepts every object the chart renders (RBAC with the operator's custom
// verbs, the Deployment in a namespace that enforces the restricted Pod
// Security Standard, the Services, the admission policies, the Ingress),
// Helm adopts what config/default had installed, the release fits in
// Helm's storage, and the CRDs outlive the release.
func TestInstallUpgradeUninstall(t *testing.T) {
	t.Parallel()
	if err := testenv.RequireBinaries("helm"); err != nil {
		t.Fatal(err)
	}
	// Flux's CRDs too: the operator's role names their kinds, and
	// checkClusterScope asks this API server the scope of each.
	env, err := testenv.Start(testenv.Options{ExtraCRDDirs: []string{filepath.Join(testenv.BinDir(), "crds", "flux")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	checkClusterScope(t, env.Client.RESTMapper())

	admin, err := env.Environment.AddUser(envtest.User{Name: "helm-test", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	helmEnv := []string{"KUBECONFIG=" + kubeconfigPath}

	warned := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = warned
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}

	installKustomization(t, c, helmEnv)
	checkPodSecurityIsEnforced(t, c, warned)

	for _, step := range []struct {
		name string
		args []string
		// notes are lines the chart's NOTES.txt must print.
		notes []string
	}{{
		name:  "install",
		args:  []string{"install", release, chartDir(), "--namespace", namespace},
		notes: []string{"kubectl -n stackyard-system rollout status deployment/stackyard"},
	}, {
		name: "upgrade",
		args: []string{"upgrade", release, chartDir(), "--namespace", namespace, "--values", everything()},
		notes: []string{
			"Cloud API (Kargo verification): http://stackyard-cloud-api.stackyard-system.svc:9091",
			"https://stackyard.example.com/",
		},
	}} {
		warned.take()
		out, err := runHelm(t, helmEnv, step.args...)
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", step.name, err, out)
		}
		for _, line := range step.notes {
			if !strings.Contains(out, line) {
				t.Errorf("helm %s does not print %q:\n%s", step.name, line, out)
			}
		}
		out, err = runHelm(t, helmEnv, "get", "manifest", release, "--namespace", namespace)
		if err != nil {
			t.Fatalf("helm get manifest: %v", err)
		}
		m := decode(t, []byte(out))
		if len(m) == 0 {
			t.Fatalf("helm %s: the release has no objects", step.name)
		}
		for _, want := range m {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(want.GroupVersionKind())
			key := client.ObjectKey{Namespace: want.GetNamespace(), Name: want.GetName()}
			if key.Namespace == "" && want.GetKind() != "CustomResourceDefinition" && !clusterScoped[want.GetKind()] {
				key.Namespace = namespace
			}
			if err := c.Get(ctx, key, got); err != nil {
				t.Errorf("helm %s: %s %s is not on the API server: %v", step.name, want.GetKind(), want.GetName(), err)
			} else if got.GetAnnotations()["meta.helm.sh/release-name"] != release {
				t.Errorf("helm %s: %s %s is not the release's", step.name, want.GetKind(), want.GetName())
			}
		}
		// The Deployment's pods would be admitted in the restricted
		// namespace: applying it again (dry run) draws no warning.
		for _, d := range m.ofKind("Deployment") {
			d.SetNamespace(namespace)
			if err := c.Patch(ctx, d, client.Apply, client.DryRunAll, client.FieldOwner("helm-test"), client.ForceOwnership); err != nil {
				t.Errorf("applying the Deployment again: %v", err)
			}
		}
		if msgs := warned.take(); len(msgs) > 0 {
			t.Errorf("helm %s: the API server warned: %s", step.name, strings.Join(msgs, "; "))
		}
	}

	if out, err := runHelm(t, helmEnv, "uninstall", release, "--namespace", namespace); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	crds := crdNames(t)
	for _, name := range crds {
		var crd unstructured.Unstructured
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
			t.Errorf("CRD %s did not outlive the release (crds.keep): %v", name, err)
		}
	}
	var gone unstructured.Unstructured
	gone.SetAPIVersion("apps/v1")
	gone.SetKind("Deployment")
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: release}, &gone); !apierrors.IsNotFound(err) {
		t.Errorf("the Deployment is still there after helm uninstall: %v", err)
	}
}

// checkClusterScope renders the chart with watchNamespaces and checks that
// the rules it binds cluster-wide (stackyard-cluster-scope) are exactly the
// generated rules on cluster-scoped resources, as the API server behind
// mapper scopes them: the chart's list of such resources misses none
// (which a RoleBinding would silently fail to grant) and holds no
// namespaced one (which would be granted in every namespace).
func checkClusterScope(t *testing.T, mapper meta.RESTMapper) {
	t.Helper()
	want, err := testenv.ClusterScopedRules(mapper, generatedRules(t))
	if err != nil {
		t.Fatal(err)
	}
	got := clusterScopeRules(t, render(t, "--set", "watchNamespaces={apps}"))
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("with watchNamespaces the chart binds cluster-wide rules other than the generated ones on cluster-scoped resources; "+
			"change the list in templates/rbac.yaml (-want +got):\n%s", d)
	}
}

// clusterScoped are the kinds of the chart that have no namespace.
var clusterScoped = map[string]bool{
	"ClusterRole": true, "ClusterRoleBinding": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
	"MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true,
}

// crdNames returns the names of the CRDs in config/crd/bases.
func crdNames(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		for _, u := range decodeFile(t, f) {
			names = append(names, u.GetName())
		}
	}
	return names
}

// installKustomization applies config/default, as an earlier install
// would have, then prepares it for Helm with the commands of
// docs/install.md ("Coming from config/default"): every object gets Helm's
// label and annotations, so that helm install adopts it, and the
// Deployment, whose selector the chart changes, is deleted. The namespace
// (created by config/default, enforcing the restricted Pod Security
// Standard) also warns, so the test can see what it would refuse.
func installKustomization(t *testing.T, c client.Client, kubeEnv []string) {
	t.Helper()
	if err := testenv.RequireBinaries("kubectl"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	kubectl := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(testenv.BinDir(), "kubectl"), args...)
		cmd.Env = append(os.Environ(), kubeEnv...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	manifests := filepath.Join(t.TempDir(), "stackyard.yaml")
	if err := os.WriteFile(manifests, []byte(kubectl("kustomize", filepath.Join(testenv.RepoRoot(), "config", "default"))), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, u := range decodeFile(t, manifests) {
		if err := c.Patch(ctx, u, client.Apply, client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
			t.Fatalf("applying config/default: %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}

	kubectl("label", "-f", manifests, "app.kubernetes.io/managed-by=Helm", "--overwrite")
	kubectl("annotate", "-f", manifests, "--overwrite",
		"meta.helm.sh/release-name="+release, "meta.helm.sh/release-namespace="+namespace)
	kubectl("-n", namespace, "delete", "deployment", "stackyard")
	kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/warn=restricted", "--overwrite")

	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
		t.Fatal(err)
	}
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Fatalf("config/default's namespace does not enforce the restricted standard: %v", ns.Labels)
	}
}

// checkPodSecurityIsEnforced makes sure the API server does check pods
// against the namespace's Pod Security level, by applying (dry run) a
// Deployment whose pods run as root: without a warning for it, the
// absence of warnings would prove nothing.
func checkPodSecurityIsEnforced(t *testing.T, c client.Client, warned *warnings) {
	t.Helper()
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "runs-as-root", "namespace": namespace},
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"app": "runs-as-root"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "runs-as-root"}},
				"spec": map[string]any{"containers": []any{map[string]any{
					"name": "root", "image": "example.com/root",
					"securityContext": map[string]any{"runAsUser": int64(0)},
				}}},
			},
		},
	}}
	warned.take()
	if err := c.Patch(context.Background(), bad, client.Apply, client.DryRunAll, client.FieldOwner("helm-test")); err != nil {
		t.Fatal(err)
	}
	if msgs := warned.take(); !strings.Contains(strings.Join(msgs, " "), "PodSecurity") {
		t.Fatalf("the API server did not warn of a Deployment that runs as root (%q): Pod Security admission is off, so the check of the chart's Deployment would prove nothing", msgs)
	}
}
