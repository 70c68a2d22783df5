// Package packaging tests the manifests users install the operator with.
package packaging

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackyard/stackyard/internal/cli"
	"github.com/stackyard/stackyard/test/testenv"
)

// crdCount is how many CRDs the repository defines: one file each in
// config/crd/bases, so a new kind needs no edit here.
func crdCount(t *testing.T) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	return len(files)
}

// kindCounts counts objects by kind.
func kindCounts(objs []*unstructured.Unstructured) map[string]int {
	n := map[string]int{}
	for _, u := range objs {
		n[u.GetKind()]++
	}
	return n
}

// render runs `kubectl kustomize` (the pinned kubectl from bin/) on dir.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	if err := testenv.RequireBinaries("kubectl"); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(testenv.BinDir(), "kubectl"), "kustomize", dir).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, exit.Stderr)
		}
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// TestDefaultKustomization renders config/default and applies it, for real,
// to an API server: every object is valid as written, everything lands in
// the stackyard-system namespace, the ServiceAccount the Deployment runs as
// is the one the ClusterRole is bound to, and every flag the Deployment
// passes is one `stackyard operator` accepts.
func TestDefaultKustomization(t *testing.T) {
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()

	objs := render(t, filepath.Join(testenv.RepoRoot(), "config", "default"))
	kinds := map[string]int{}
	var deployment appsv1.Deployment
	var bindingSubjects []any
	for _, u := range objs {
		kinds[u.GetKind()]++
		if ns := u.GetNamespace(); ns != "" && ns != "stackyard-system" {
			t.Errorf("%s %s is in namespace %q", u.GetKind(), u.GetName(), ns)
		}
		if err := env.Client.Patch(ctx, u, client.Apply, client.FieldOwner("packaging-test"), client.ForceOwnership); err != nil {
			t.Errorf("applying %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		switch u.GetKind() {
		case "Deployment":
			if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &deployment); err != nil {
				t.Fatal(err)
			}
		case "ClusterRoleBinding":
			bindingSubjects, _, _ = unstructured.NestedSlice(u.Object, "subjects")
		}
	}
	policies := kindCounts(render(t, filepath.Join(testenv.RepoRoot(), "config", "policy")))
	for kind, n := range map[string]int{"CustomResourceDefinition": crdCount(t), "ValidatingAdmissionPolicy": policies["ValidatingAdmissionPolicy"],
		"ValidatingAdmissionPolicyBinding": policies["ValidatingAdmissionPolicyBinding"], "Namespace": 1, "ServiceAccount": 1, "ClusterRole": 7,
		"ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1, "Deployment": 1, "Service": 3, "MutatingWebhookConfiguration": 1, "ValidatingWebhookConfiguration": 1} {
		if kinds[kind] != n {
			t.Errorf("%d objects of kind %s, want %d", kinds[kind], kind, n)
		}
	}

	spec := deployment.Spec.Template.Spec
	if len(bindingSubjects) != 1 || bindingSubjects[0].(map[string]any)["name"] != spec.ServiceAccountName ||
		bindingSubjects[0].(map[string]any)["namespace"] != "stackyard-system" {
		t.Errorf("the ClusterRole is bound to %v, the operator runs as %s/%s", bindingSubjects, deployment.Namespace, spec.ServiceAccountName)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Containers))
	}
	args := spec.Containers[0].Args
	if len(args) == 0 || args[0] != "operator" {
		t.Fatalf("args %v do not run `stackyard operator`", args)
	}
	cmd, _, err := cli.NewRootCommand().Find([]string{"operator"})
	if err != nil {
		t.Fatal(err)
	}
	for _, arg := range args[1:] {
		name, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		if !strings.HasPrefix(arg, "--") || cmd.Flags().Lookup(name) == nil {
			t.Errorf("the Deployment passes %q, which `stackyard operator` does not accept", arg)
		}
	}
}
