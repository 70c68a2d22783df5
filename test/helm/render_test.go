// Package helm_test tests the Helm chart in deploy/helm/stackyard with the
// pinned helm from bin/: it lints the chart, renders it with the default
// values, with every option on (testdata/everything.yaml) and with each
// switch flipped, checks what it renders against the operator's own flags
// and against the generated files the chart copies (CRDs, the ClusterRole,
// the admission policies), and installs, upgrades and uninstalls it on a
// real API server.
package helm_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/stackyard/stackyard/test/testenv"
)

const (
	// release and namespace are what the docs install as: the Services are
	// then stackyard-artifacts, stackyard-cloud-api... in stackyard-system.
	release   = "stackyard"
	namespace = "stackyard-system"
)

// chartDir is the chart under test.
func chartDir() string { return filepath.Join(testenv.RepoRoot(), "deploy", "helm", "stackyard") }

// everything is the values file with every option on.
func everything() string {
	return filepath.Join(testenv.RepoRoot(), "test", "helm", "testdata", "everything.yaml")
}

// runHelm runs bin/helm with args and returns its standard output, or its
// error with standard error. Helm's configuration, cache and data go to
// fresh directories, so nothing of the developer's own Helm setup (plugins,
// repositories, registry logins) takes part; extraEnv adds KUBECONFIG.
func runHelm(t *testing.T, extraEnv []string, args ...string) (string, error) {
	t.Helper()
	if err := testenv.RequireBinaries("helm"); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	cmd := exec.Command(filepath.Join(testenv.BinDir(), "helm"), args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"),
	)
	cmd.Env = append(cmd.Env, extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), errors.New(err.Error() + "\n" + stderr.String() + stdout.String())
	}
	return stdout.String(), nil
}

// manifest is what `helm template` rendered, in order.
type manifest []*unstructured.Unstructured

// render runs `helm template` for release in namespace with the given
// extra arguments (-f FILE, --set K=V) and decodes the result.
func render(t *testing.T, args ...string) manifest {
	t.Helper()
	out, err := runHelm(t, nil, append([]string{"template", release, chartDir(), "--namespace", namespace}, args...)...)
	if err != nil {
		t.Fatalf("helm template %v: %v", args, err)
	}
	return decode(t, []byte(out))
}

// decode parses a stream of YAML documents into objects, skipping empty
// ones (comments only).
func decode(t *testing.T, data []byte) manifest {
	t.Helper()
	var objs manifest
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
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

// decodeFile decodes the YAML documents of a file.
func decodeFile(t *testing.T, path string) manifest {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, data)
}

// ofKind returns the objects of one kind.
func (m manifest) ofKind(kind string) manifest {
	var out manifest
	for _, u := range m {
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	return out
}

// get returns the object of a kind and name, or nil.
func (m manifest) get(kind, name string) *unstructured.Unstructured {
	for _, u := range m {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

// kinds counts the objects of each kind.
func (m manifest) kinds() map[string]int {
	n := map[string]int{}
	for _, u := range m {
		n[u.GetKind()]++
	}
	return n
}

func TestLint(t *testing.T) {
	t.Parallel()
	for name, args := range map[string][]string{
		"defaults":   nil,
		"everything": {"--values", everything()},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if out, err := runHelm(t, nil, append([]string{"lint", "--strict", "--namespace", namespace, chartDir()}, args...)...); err != nil {
				t.Errorf("helm lint --strict: %v\n%s", err, out)
			}
		})
	}
}
