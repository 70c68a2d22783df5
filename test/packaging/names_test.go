package packaging

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/discovery"

	"github.com/stackyard/stackyard/test/testenv"
)

// otherNames are resource names, singular names and short names that
// projects often installed beside stackyard serve (Kargo, Flux, Tekton,
// Argo CD, Argo Rollouts and Workflows, Crossplane): a stackyard short
// name must be none of them, so that `kubectl get NAME` means one thing.
var otherNames = []string{
	// Kargo
	"stage", "stages", "promotion", "promotions", "promo", "freight", "freights", "warehouse", "warehouses",
	"project", "projects", "promotiontask", "promotiontasks", "clusterpromotiontask",
	// Flux
	"alert", "alerts", "provider", "providers", "receiver", "receivers", "ks", "kustomization",
	"gitrepo", "gitrepository", "hr", "helmrelease", "ocirepo", "bucket", "imagerepo", "imagepolicy",
	// Tekton
	"pipeline", "pipelines", "pipelinerun", "pipelineruns", "pr", "task", "tasks", "taskrun", "tr",
	// Argo CD, Rollouts, Workflows
	"app", "apps", "application", "appproj", "appproject", "appset", "applicationset", "rollout", "ro",
	"analysistemplate", "at", "analysisrun", "ar", "experiment", "exp", "wf", "workflow", "wftmpl",
	// Crossplane, Pulumi's own operator
	"release", "releases", "approval", "approvals", "stack", "stacks", "program", "programs",
	"workspace", "workspaces", "update", "updates", "composition", "comp",
}

// TestNamesAndCategory installs the CRDs on a real API server and reads
// them back through discovery, as kubectl does: every stackyard kind is in
// the category "stackyard" (so `kubectl get stackyard` lists them all),
// and no short name clashes with a name of the built-in API, of another
// stackyard kind, or of the projects in otherNames.
func TestNamesAndCategory(t *testing.T) {
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]bool{"pulumi.com": true, "auto.pulumi.com": true, "promotion.stackyard.dev": true, "notification.stackyard.dev": true}
	taken := map[string]string{} // a name kubectl resolves → the resource it names
	for _, name := range otherNames {
		taken[name] = "another project's"
	}
	var kinds []string
	for _, list := range lists {
		group, _, _ := strings.Cut(list.GroupVersion, "/")
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") {
				continue
			}
			resource := r.Name + "." + group
			if !ours[group] {
				for _, n := range append([]string{r.Name, r.SingularName}, r.ShortNames...) {
					taken[n] = resource
				}
				continue
			}
			kinds = append(kinds, r.Kind)
			if !slices.Contains(r.Categories, "stackyard") {
				t.Errorf("%s is not in the category stackyard (categories %v)", resource, r.Categories)
			}
			if group == "pulumi.com" || group == "auto.pulumi.com" {
				// The kinds shared with the Pulumi Kubernetes Operator keep
				// its names, and its category.
				if !slices.Contains(r.Categories, "pulumi") {
					t.Errorf("%s lost the category pulumi", resource)
				}
				continue
			}
			if len(r.ShortNames) == 0 {
				t.Errorf("%s has no short name", resource)
			}
			for _, short := range r.ShortNames {
				if other, ok := taken[short]; ok {
					t.Errorf("the short name %q of %s is also %s", short, resource, other)
				}
				taken[short] = resource
			}
		}
	}
	want := crdCount(t)
	if len(kinds) != want {
		t.Errorf("discovery serves %d stackyard kinds, want %d (the CRDs of config/crd/bases): %v", len(kinds), want, kinds)
	}

	// kubectl resolves the category to the same kinds.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := testenv.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(testenv.BinDir(), "kubectl"), "--kubeconfig", kubeconfig,
		"api-resources", "--categories=stackyard", "-o", "name").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl api-resources: %v\n%s", err, out)
	}
	if got := strings.Fields(string(out)); len(got) != want {
		t.Errorf("kubectl api-resources --categories=stackyard lists %d resources, want %d:\n%s", len(got), want, out)
	}
	out, err = exec.Command(filepath.Join(testenv.BinDir(), "kubectl"), "--kubeconfig", kubeconfig,
		"get", "stackyard", "--all-namespaces").CombinedOutput()
	if err != nil {
		t.Errorf("kubectl get stackyard: %v\n%s", err, out)
	}
}
