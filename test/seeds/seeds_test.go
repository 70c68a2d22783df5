// Package seeds checks wire compatibility with the Pulumi Kubernetes Operator
// v2: every Stack and Program manifest from the documents stackyard is built
// from must be accepted, unchanged, by a real API server serving our CRDs, and
// the classic mistakes must be refused with a message that names the field.
package seeds

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stackyard/stackyard/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = testenv.Start(testenv.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
	}
	os.Exit(code)
}

// readManifest decodes one YAML manifest into an unstructured object, so the
// test sends exactly the fields the document wrote, not what our Go types
// would make of them.
func readManifest(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return obj
}

// ensureNamespace creates the manifest's namespace (default when unset), since
// a dry run into a missing namespace fails for a reason unrelated to the API.
func ensureNamespace(ctx context.Context, obj *unstructured.Unstructured) error {
	if obj.GetNamespace() == "" {
		obj.SetNamespace("default")
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: obj.GetNamespace()}}
	if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// dryRunApply sends obj as a server-side apply with strict field validation:
// an unknown or mistyped field is an error rather than silently dropped, so
// "accepted" means accepted unchanged.
func dryRunApply(ctx context.Context, obj *unstructured.Unstructured) error {
	return env.Client.Patch(ctx, obj, client.Apply, client.DryRunAll,
		client.FieldOwner("seeds-test"), client.ForceOwnership, client.FieldValidation("Strict"))
}

// normalized round-trips v through JSON so that numbers compare equal
// whether they were decoded as int64 (API response) or float64 (YAML).
func normalized(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func manifests(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	if len(paths) == 0 {
		t.Fatalf("no manifests in testdata/%s", dir)
	}
	return paths
}

func TestSeedManifestsAreAccepted(t *testing.T) {
	ctx := context.Background()
	for _, path := range manifests(t, "valid") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			g := NewWithT(t)
			obj := readManifest(t, path)
			g.Expect(ensureNamespace(ctx, obj)).To(Succeed())
			want := obj.DeepCopy()
			g.Expect(dryRunApply(ctx, obj)).To(Succeed())
			// Nothing the manifest said may be lost on the way in.
			for _, field := range []string{"spec", "program"} {
				if sent, ok := want.Object[field]; ok {
					g.Expect(normalized(t, obj.Object[field])).To(Equal(normalized(t, sent)), "%s changed by the API server", field)
				}
			}
		})
	}
}

// TestInvalidSeedManifestIsRejected covers the one seed manifest that the
// upstream v2 API would refuse too: the API server must say which fields.
func TestInvalidSeedManifestIsRejected(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	obj := readManifest(t, filepath.Join("testdata", "invalid", "argocd-with-operator-stack-apps-dev.yaml"))
	g.Expect(ensureNamespace(ctx, obj)).To(Succeed())
	err := dryRunApply(ctx, obj)
	g.Expect(err).To(HaveOccurred())
	// The API server names a varying subset of the fields at fault in its
	// typed-patch error (requirement, succeededWithinDuration, output), but
	// always some under each of the two broken parts.
	g.Expect(err.Error()).To(And(
		ContainSubstring("spec.prerequisites[0]."),
		ContainSubstring("spec.envRefs.KUBECONFIG"),
	))
}

// baseStack is a minimal valid Stack that each bad variant breaks in one way.
func baseStack(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pulumi.com/v1",
		"kind":       "Stack",
		"metadata":   map[string]any{"name": name, "namespace": "default"},
		"spec": map[string]any{
			"stack":       "dev",
			"projectRepo": "https://example.invalid/repo.git",
			"branch":      "main",
		},
	}}
}

func TestBadStacksAreRejectedNamingTheField(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(obj *unstructured.Unstructured)
		// want are substrings of the error: the field path and what is wrong.
		want []string
	}{{
		name: "commit and branch together",
		mutate: func(obj *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(obj.Object, "0123456789abcdef0123456789abcdef01234567", "spec", "commit")
		},
		want: []string{"spec.commit", "spec.branch"},
	}, {
		name: "projectRepo without commit or branch",
		mutate: func(obj *unstructured.Unstructured) {
			unstructured.RemoveNestedField(obj.Object, "spec", "branch")
		},
		want: []string{"spec.commit", "spec.branch"},
	}, {
		name: "two sources",
		mutate: func(obj *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(obj.Object, map[string]any{"name": "prog"}, "spec", "programRef")
		},
		want: []string{"spec.projectRepo", "spec.programRef"},
	}, {
		name: "unknown envRef type",
		mutate: func(obj *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(obj.Object, map[string]any{
				"FOO": map[string]any{"type": "Vault", "literal": map[string]any{"value": "x"}},
			}, "spec", "envRefs")
		},
		want: []string{"spec.envRefs.FOO.type", "Unsupported value"},
	}, {
		name: "secret envRef without secret selector",
		mutate: func(obj *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(obj.Object, map[string]any{
				"FOO": map[string]any{"type": "Secret", "literal": map[string]any{"value": "x"}},
			}, "spec", "envRefs")
		},
		want: []string{"spec.envRefs[FOO]", "type Secret must set secret"},
	}, {
		name: "name too long for derived objects",
		mutate: func(obj *unstructured.Unstructured) {
			obj.SetName(strings.Repeat("a", 43))
		},
		want: []string{"metadata.name", "42"},
	}, {
		name: "negative resync interval",
		mutate: func(obj *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(obj.Object, int64(-5), "spec", "resyncFrequencySeconds")
		},
		want: []string{"spec.resyncFrequencySeconds", "greater than or equal to 0"},
	}, {
		name: "unknown reclaim policy",
		mutate: func(obj *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(obj.Object, "Keep", "spec", "workspaceReclaimPolicy")
		},
		want: []string{"spec.workspaceReclaimPolicy", "Unsupported value"},
	}, {
		name: "missing stack name",
		mutate: func(obj *unstructured.Unstructured) {
			unstructured.RemoveNestedField(obj.Object, "spec", "stack")
		},
		want: []string{"spec.stack", "Required"},
	}}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			obj := baseStack("bad-variant")
			g.Expect(dryRunApply(ctx, obj.DeepCopy())).To(Succeed(), "the base Stack itself must be valid")
			tt.mutate(obj)
			err := dryRunApply(ctx, obj)
			g.Expect(err).To(HaveOccurred())
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
			for _, s := range tt.want {
				g.Expect(err.Error()).To(ContainSubstring(s))
			}
		})
	}
}
