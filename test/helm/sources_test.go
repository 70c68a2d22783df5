package helm_test

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stackyard/stackyard/test/testenv"
)

// chartCopies maps each file that `make generate` (mk/helm.mk) copies into
// the chart, relative to the chart, to its source, relative to the
// repository. It is computed from the sources, so a new CRD or policy is
// expected in the chart as soon as it exists.
func chartCopies(t *testing.T) map[string]string {
	t.Helper()
	repo := testenv.RepoRoot()
	copies := map[string]string{
		"files/rbac/role.yaml":                 "config/rbac/role.yaml",
		"files/rbac/leader_election_role.yaml": "config/rbac/leader_election_role.yaml",
		"files/people/roles.yaml":              "config/people/roles.yaml",
	}
	for dir, pattern := range map[string]string{"files/crds": "config/crd/bases/*.yaml", "files/policy": "config/policy/*.yaml"} {
		sources, err := filepath.Glob(filepath.Join(repo, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, src := range sources {
			if filepath.Base(src) == "kustomization.yaml" {
				continue
			}
			rel, _ := filepath.Rel(repo, src)
			copies[dir+"/"+filepath.Base(src)] = rel
		}
	}
	return copies
}

// TestChartCopiesAreCurrent fails when a generated file the chart carries
// differs from its source, is missing, or no longer has one: the chart
// must never hold a hand-edited or stale copy.
func TestChartCopiesAreCurrent(t *testing.T) {
	t.Parallel()
	repo, chart := testenv.RepoRoot(), chartDir()
	copies := chartCopies(t)
	for rel, src := range copies {
		want, err := os.ReadFile(filepath.Join(repo, src))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(chart, rel))
		switch {
		case os.IsNotExist(err):
			t.Errorf("the chart lacks %s, a copy of %s: run `make generate`", rel, src)
		case err != nil:
			t.Fatal(err)
		case !bytes.Equal(got, want):
			t.Errorf("the chart's %s differs from %s: run `make generate` (never edit the copy)", rel, src)
		}
	}
	for _, dir := range []string{"crds", "rbac", "policy"} {
		entries, err := os.ReadDir(filepath.Join(chart, "files", dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if rel := "files/" + dir + "/" + e.Name(); copies[rel] == "" {
				t.Errorf("the chart's %s is a copy of nothing: run `make generate`", rel)
			}
		}
	}
}

// chartLabels are the labels the chart puts on every object, on top of
// those of the generated source.
var chartLabels = []string{
	"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
	"app.kubernetes.io/managed-by", "helm.sh/chart",
}

// withoutChartMetadata returns a copy of u without what the chart adds to a
// generated object: its labels and the keep policy of a CRD.
func withoutChartMetadata(u *unstructured.Unstructured) *unstructured.Unstructured {
	c := u.DeepCopy()
	labels := c.GetLabels()
	for _, k := range chartLabels {
		delete(labels, k)
	}
	if len(labels) == 0 {
		unstructured.RemoveNestedField(c.Object, "metadata", "labels")
	} else {
		c.SetLabels(labels)
	}
	annotations := c.GetAnnotations()
	delete(annotations, "helm.sh/resource-policy")
	if len(annotations) == 0 {
		unstructured.RemoveNestedField(c.Object, "metadata", "annotations")
	} else {
		c.SetAnnotations(annotations)
	}
	return c
}

// shortDiff is cmp.Diff cut to a readable length (a CRD's diff can be
// megabytes).
func shortDiff(want, got any) string {
	d := cmp.Diff(want, got)
	if len(d) > 3000 {
		d = d[:3000] + "\n..."
	}
	return d
}

// checkGenerated asserts that the CRDs, the ClusterRole's and leader
// election Role's rules and the admission policies in m are exactly those
// of config/, apart from the chart's labels. crds and policies say whether
// m should hold them at all.
func checkGenerated(t *testing.T, m manifest, crds, policies bool) {
	t.Helper()
	repo := testenv.RepoRoot()

	sources, err := filepath.Glob(filepath.Join(repo, "config", "crd", "bases", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var wantCRDs, gotCRDs []string
	for _, src := range sources {
		for _, want := range decodeFile(t, src) {
			wantCRDs = append(wantCRDs, want.GetName())
			got := m.get("CustomResourceDefinition", want.GetName())
			if got == nil {
				continue
			}
			if d := shortDiff(want.Object, withoutChartMetadata(got).Object); d != "" {
				t.Errorf("the chart's CRD %s differs from %s (-source +chart):\n%s", want.GetName(), filepath.Base(src), d)
			}
		}
	}
	for _, u := range m.ofKind("CustomResourceDefinition") {
		gotCRDs = append(gotCRDs, u.GetName())
	}
	if !crds {
		wantCRDs = nil
	}
	sort.Strings(wantCRDs)
	sort.Strings(gotCRDs)
	if d := cmp.Diff(wantCRDs, gotCRDs); d != "" {
		t.Errorf("the chart's CRDs are not config/crd/bases' (-want +got):\n%s", d)
	}

	// The generated roles are the ClusterRole named *-manager (with
	// watchNamespaces a second one holds a part of its rules) and the one
	// Role.
	for _, role := range []struct{ kind, suffix, src string }{
		{"ClusterRole", "-manager", "role.yaml"},
		{"Role", "", "leader_election_role.yaml"},
	} {
		var rendered manifest
		for _, u := range m.ofKind(role.kind) {
			if strings.HasSuffix(u.GetName(), role.suffix) {
				rendered = append(rendered, u)
			}
		}
		if len(rendered) == 0 {
			continue // rbac.create=false; the callers count the kinds.
		}
		if len(rendered) > 1 {
			t.Errorf("%d objects of kind %s named *%s, want 1", len(rendered), role.kind, role.suffix)
			continue
		}
		want := decodeFile(t, filepath.Join(repo, "config", "rbac", role.src))
		if d := cmp.Diff(want[0].Object["rules"], rendered[0].Object["rules"]); d != "" {
			t.Errorf("the %s's rules are not config/rbac/%s's (-source +chart):\n%s", role.kind, role.src, d)
		}
	}

	policyFiles, err := filepath.Glob(filepath.Join(repo, "config", "policy", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	nPolicies := 0
	for _, src := range policyFiles {
		if filepath.Base(src) == "kustomization.yaml" {
			continue
		}
		for _, want := range decodeFile(t, src) {
			nPolicies++
			got := m.get(want.GetKind(), want.GetName())
			switch {
			case !policies && got != nil:
				t.Errorf("%s %s is rendered, though admission policies are off", want.GetKind(), want.GetName())
			case policies && got == nil:
				t.Errorf("%s %s of config/policy/%s is missing", want.GetKind(), want.GetName(), filepath.Base(src))
			case policies:
				if d := shortDiff(want.Object, withoutChartMetadata(got).Object); d != "" {
					t.Errorf("the chart's %s %s differs from config/policy/%s (-source +chart):\n%s", want.GetKind(), want.GetName(), filepath.Base(src), d)
				}
			}
		}
	}
	if got := len(m.ofKind("ValidatingAdmissionPolicy")) + len(m.ofKind("ValidatingAdmissionPolicyBinding")); policies && got != nPolicies {
		t.Errorf("%d admission policies and bindings rendered, config/policy has %d", got, nPolicies)
	}
}
