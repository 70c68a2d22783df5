package surface

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/stackyard/stackyard/test/testenv"
)

// The attack surface, derived from the repository: nothing here lists a
// kind, a field or a key by hand.

// readResources are the resources the operator's generated ClusterRole
// lets it read (get, list or watch), subresources left out.
func readResources(t *testing.T) []schema.GroupResource {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatal(err)
	}
	seen := map[schema.GroupResource]bool{}
	for _, rule := range role.Rules {
		if !slices.ContainsFunc(rule.Verbs, func(v string) bool { return v == "get" || v == "list" || v == "watch" }) {
			continue
		}
		for _, g := range rule.APIGroups {
			for _, r := range rule.Resources {
				if !strings.Contains(r, "/") {
					seen[schema.GroupResource{Group: g, Resource: r}] = true
				}
			}
		}
	}
	out := make([]schema.GroupResource, 0, len(seen))
	for gr := range seen {
		out = append(out, gr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// crdSchemas are the storage version's schema of every CRD the operator
// serves or reads, by group and plural.
func crdSchemas(t *testing.T) map[schema.GroupResource]*apiextensionsv1.JSONSchemaProps {
	t.Helper()
	out := map[schema.GroupResource]*apiextensionsv1.JSONSchemaProps{}
	// The operator's own, and Flux's source CRDs, which it reads.
	for _, dir := range []string{filepath.Join(testenv.RepoRoot(), "config", "crd", "bases"), filepath.Join(testenv.BinDir(), "crds", "flux")} {
		readCRDs(t, dir, out)
	}
	return out
}

// readCRDs adds the schemas of the CRDs in dir to out.
func readCRDs(t *testing.T, dir string, out map[schema.GroupResource]*apiextensionsv1.JSONSchemaProps) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Storage && v.Schema != nil {
				out[schema.GroupResource{Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural}] = v.Schema.OpenAPIV3Schema
			}
		}
	}
}

// keyPattern is a label or annotation key of the operator's domains, as a
// Go string literal.
var keyPattern = regexp.MustCompile(`"((?:[a-z0-9-]+\.)*(?:pulumi\.com|stackyard\.dev)/[a-z0-9][a-z0-9._-]*)"`)

// apiVersion is what a key would be if it were an API group and version.
var apiVersion = regexp.MustCompile(`/v[0-9]+((alpha|beta)[0-9]+)?$`)

// metadataKeys are the label and annotation keys the operator's code
// names: every string literal of the form <domain>/<name> in a domain of
// its own, in the non-test Go files of api/ and internal/.
func metadataKeys(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	for _, top := range []string{"api", "internal"} {
		err := filepath.WalkDir(filepath.Join(testenv.RepoRoot(), top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range keyPattern.FindAllStringSubmatch(string(data), -1) {
				if !apiVersion.MatchString(m[1]) {
					seen[m[1]] = true
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// maxDepth bounds how deep under spec and status fields are walked one by
// one; below it, an object is replaced whole.
const maxDepth = 4

// field is one field of a schema, and a value an attacker writes there.
type field struct {
	path  []string
	value any
}

func (f field) String() string { return strings.Join(f.path, ".") }

// fields walks s, the schema of the value at path, and returns each field
// with a value of its type that differs from a usual one.
func fields(s *apiextensionsv1.JSONSchemaProps, path []string) []field {
	if s == nil {
		return nil
	}
	leaf := func(v any) []field { return []field{{path: slices.Clone(path), value: v}} }
	switch {
	case s.XIntOrString:
		return leaf("mallory")
	case len(s.Enum) > 0:
		var v any
		_ = json.Unmarshal(s.Enum[len(s.Enum)-1].Raw, &v)
		return leaf(v)
	}
	switch s.Type {
	case "string":
		return leaf("mallory")
	case "integer", "number":
		return leaf(7)
	case "boolean":
		return leaf(true)
	case "array":
		return leaf([]any{})
	case "object":
		if len(s.Properties) == 0 || len(path) >= maxDepth {
			return leaf(map[string]any{"mallory": "x"})
		}
		var out []field
		names := make([]string, 0, len(s.Properties))
		for name := range s.Properties {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			p := s.Properties[name]
			out = append(out, fields(&p, append(slices.Clone(path), name))...)
		}
		return out
	}
	return leaf("mallory")
}

// mergePatch is the JSON merge patch that sets f.
func (f field) mergePatch() []byte {
	v := f.value
	for i := len(f.path) - 1; i >= 0; i-- {
		v = map[string]any{f.path[i]: v}
	}
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encoding %s: %v", f, err))
	}
	return data
}

// TestDerivation: the derived surface is the repository's, not an empty
// one a broken parser would give.
func TestDerivation(t *testing.T) {
	reads := readResources(t)
	schemas := crdSchemas(t)
	for _, want := range []schema.GroupResource{
		{Group: "pulumi.com", Resource: "stacks"}, {Group: "auto.pulumi.com", Resource: "updates"},
		{Group: "auto.pulumi.com", Resource: "workspaces"}, {Group: "promotion.stackyard.dev", Resource: "stages"},
		{Group: "", Resource: "secrets"},
	} {
		if !slices.Contains(reads, want) {
			t.Errorf("the operator's role reads no %s: %v", want, reads)
		}
	}
	for _, gr := range reads {
		if strings.HasSuffix(gr.Group, "pulumi.com") || strings.HasSuffix(gr.Group, "stackyard.dev") {
			if schemas[gr] == nil {
				t.Errorf("no CRD schema for %s, which the operator reads", gr)
			}
		}
	}
	stack := schemas[schema.GroupResource{Group: "pulumi.com", Resource: "stacks"}]
	if n := len(fields(ptrTo(stack.Properties["spec"]), []string{"spec"})); n < 80 {
		t.Errorf("only %d fields under a Stack's spec", n)
	}
	keys := metadataKeys(t)
	for _, want := range []string{"promotion.stackyard.dev/authorized-stage", "promotion.stackyard.dev/preview-stages",
		"pulumi.com/reconciliation-request", "promotion.stackyard.dev/plan"} {
		if !slices.Contains(keys, want) {
			t.Errorf("metadataKeys lacks %s: %v", want, keys)
		}
	}
	for _, k := range keys {
		if apiVersion.MatchString(k) {
			t.Errorf("%s is an API version, not a key", k)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
