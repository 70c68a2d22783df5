// Package crdtest helps test the API types as clients see them, in process:
//
//   - against the generated CustomResourceDefinitions, the way the API server
//     checks them: the CRD itself must pass the API server's CRD validation
//     (which compiles the CEL rules and estimates their cost), and objects
//     are checked against a version's OpenAPI schema and CEL rules;
//   - against manifests: RoundTrip proves that a manifest's field names are
//     all known to the Go types and survive decoding and encoding.
package crdtest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	schemavalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// DirEnv names an environment variable that overrides where the CRD
// manifests are read from (by default config/crd/bases in the repository).
const DirEnv = "STACKYARD_CRD_DIR"

// Dir returns the directory the CRD manifests are read from.
func Dir() string {
	if dir := os.Getenv(DirEnv); dir != "" {
		return dir
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("crdtest: cannot locate the source file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "config", "crd", "bases")
}

// CRD is a loaded CustomResourceDefinition, in the API server's internal form.
type CRD struct {
	// Definition is the CRD as the API server sees it.
	Definition *apiextensions.CustomResourceDefinition
}

// Load reads the CRD called name (e.g. "stacks.pulumi.com") from Dir. When the
// manifests have not been generated yet, the test is skipped with a note to
// run `make generate`.
func Load(t testing.TB, name string) *CRD {
	t.Helper()
	dir := Dir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("no generated CRDs in %s (%v): run `make generate`, or set %s", dir, err, DirEnv)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var v1crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &v1crd); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		if v1crd.Name != name {
			continue
		}
		apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(&v1crd)
		var internal apiextensions.CustomResourceDefinition
		if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&v1crd, &internal, nil); err != nil {
			t.Fatalf("%s: converting: %v", e.Name(), err)
		}
		return &CRD{Definition: &internal}
	}
	t.Fatalf("no CRD named %s in %s", name, dir)
	return nil
}

// DefinitionErrors returns what the API server would object to in the CRD
// itself, including CEL rules that do not compile or cost too much.
func (c *CRD) DefinitionErrors() field.ErrorList {
	return crdvalidation.ValidateCustomResourceDefinition(context.Background(), c.Definition)
}

// Validate checks obj (an object as decoded from YAML or JSON) against the
// OpenAPI schema and the CEL rules of the given version, as the API server
// does when the object is created.
func (c *CRD) Validate(t testing.TB, version string, obj map[string]any) field.ErrorList {
	t.Helper()
	// The internal form keeps a schema shared by every version at the top.
	var props *apiextensions.JSONSchemaProps
	if c.Definition.Spec.Validation != nil {
		props = c.Definition.Spec.Validation.OpenAPIV3Schema
	}
	for _, v := range c.Definition.Spec.Versions {
		if v.Name == version && v.Schema != nil {
			props = v.Schema.OpenAPIV3Schema
		}
	}
	if props == nil {
		t.Fatalf("%s has no schema for version %s", c.Definition.Name, version)
	}
	validator, _, err := schemavalidation.NewSchemaValidator(props)
	if err != nil {
		t.Fatalf("%s/%s: building the schema validator: %v", c.Definition.Name, version, err)
	}
	errs := schemavalidation.ValidateCustomResource(nil, obj, validator)
	structural, err := structuralschema.NewStructural(props)
	if err != nil {
		t.Fatalf("%s/%s: not a structural schema: %v", c.Definition.Name, version, err)
	}
	celErrs, _ := cel.NewValidator(structural, true, celconfig.PerCallLimit).
		Validate(context.Background(), nil, structural, obj, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// FromYAML decodes a YAML manifest into the generic form Validate takes, with
// whole numbers as int64 as the API server decodes them.
func FromYAML(t testing.TB, manifest string) map[string]any {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatalf("decoding manifest: %v", err)
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(data, &obj); err != nil {
		t.Fatalf("decoding manifest: %v", err)
	}
	return obj
}

// ExpectError fails the test unless errs matches want: no error when want is
// empty, otherwise an error whose text contains want.
func ExpectError(t testing.TB, errs field.ErrorList, want string) {
	t.Helper()
	switch {
	case want == "" && len(errs) > 0:
		t.Fatalf("want the object accepted, got %v", errs.ToAggregate())
	case want != "" && len(errs) == 0:
		t.Fatalf("want an error containing %q, got none", want)
	case want != "" && !strings.Contains(errs.ToAggregate().Error(), want):
		t.Fatalf("want an error containing %q, got %v", want, errs.ToAggregate())
	}
}

// RoundTrip decodes manifest strictly (an unknown field is an error) into
// typed, encodes typed again, and checks that each of the given top-level
// fields (e.g. "spec", "status") comes back unchanged.
func RoundTrip(t testing.TB, manifest string, typed any, fields ...string) {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(manifest), typed); err != nil {
		t.Fatalf("strict decoding: %v", err)
	}
	var original map[string]any
	if err := yaml.Unmarshal([]byte(manifest), &original); err != nil {
		t.Fatal(err)
	}
	encoded, err := json.Marshal(typed)
	if err != nil {
		t.Fatal(err)
	}
	var again map[string]any
	if err := json.Unmarshal(encoded, &again); err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		if !reflect.DeepEqual(original[f], again[f]) {
			want, _ := yaml.Marshal(original[f])
			got, _ := yaml.Marshal(again[f])
			t.Errorf("%s changed in a round trip:\nwant:\n%s\ngot:\n%s", f, want, got)
		}
	}
}
