package docscheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// CRD is one of our custom resource definitions: the names kubectl knows
// it by and the schemas of its served versions.
type CRD struct {
	// Group is its API group.
	Group string
	// Names are its plural, singular, kind, short names and categories.
	Names apiextensionsv1.CustomResourceDefinitionNames
	// Schemas are the openAPIV3Schemas of its served versions.
	Schemas []*apiextensionsv1.JSONSchemaProps
	// Selectable are the paths `kubectl get --field-selector` accepts
	// besides metadata.name and metadata.namespace (selectableFields,
	// without their leading dot), of any served version.
	Selectable []string
}

// LoadCRDs reads every CRD manifest in dir (config/crd/bases), one CRD a
// file.
func LoadCRDs(dir string) ([]CRD, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []CRD
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var def apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &def); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if def.Kind != "CustomResourceDefinition" {
			continue // a kustomization, say
		}
		crd := CRD{Group: def.Spec.Group, Names: def.Spec.Names}
		for _, v := range def.Spec.Versions {
			if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			crd.Schemas = append(crd.Schemas, v.Schema.OpenAPIV3Schema)
			for _, s := range v.SelectableFields {
				crd.Selectable = append(crd.Selectable, strings.TrimPrefix(s.JSONPath, "."))
			}
		}
		if def.Spec.Names.Kind == "" || len(crd.Schemas) == 0 {
			return nil, fmt.Errorf("%s: no kind or no served version with a schema", f)
		}
		out = append(out, crd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Names.Plural < out[j].Names.Plural })
	return out, nil
}

// Resource is how kubectl is told of a kind in a command line: "stacks",
// "stack", "stacks.pulumi.com", a short name or a category.
type Resource string

// apiVersion matches a Kubernetes API version: v1, v1alpha1, v2beta3.
var apiVersion = regexp.MustCompile(`^v[0-9]+(?:(?:alpha|beta)[0-9]+)?$`)

// Matches reports whether kubectl would take r for c: one of its names in
// lower case, optionally followed by its group (the whole group, as
// "stacks.pulumi.com", or as kubectl also accepts, a version and group,
// "stacks.v1.pulumi.com"), or one of its categories.
func (c CRD) Matches(r Resource) bool {
	name, group, qualified := strings.Cut(strings.ToLower(string(r)), ".")
	if version, ok := strings.CutSuffix(group, "."+c.Group); ok && apiVersion.MatchString(version) {
		group = c.Group
	}
	if qualified && group != c.Group {
		return false
	}
	n := c.Names
	if name == n.Plural || name == n.Singular || name == strings.ToLower(n.Kind) {
		return true
	}
	for _, s := range append(append([]string{}, n.ShortNames...), n.Categories...) {
		if name == s {
			return true
		}
	}
	return false
}

// HasPath reports whether the field path p (see ParsePath) exists in one
// of c's served schemas, from the object's root. Everything below
// metadata exists: a CRD's schema leaves ObjectMeta to the API server.
func (c CRD) HasPath(p []string) bool {
	if len(p) > 0 && p[0] == "metadata" {
		return true
	}
	for _, s := range c.Schemas {
		if hasPath(s, p) {
			return true
		}
	}
	return false
}

// pathSegment matches one dotted segment of a field path written in the
// docs: a name, a name followed by index brackets, or an elision.
var pathSegment = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_-]*)?((?:\[[^\]]*\])*)$`)

// ParsePath splits a dotted field path as the docs write it into
// segments: "spec.stacks[0].config" gives spec, stacks, [], config. An
// index of any kind ([], [0], [i], [KEY], [*]) is the segment "[]": an
// item of a list or a value of a map. An elision ("a...b") is the segment
// "**", any number of segments. A trailing "…" or "..." (the docs' "and
// the rest") is dropped.
func ParsePath(s string) ([]string, error) {
	s = strings.TrimRight(s, ".…")
	if s == "" {
		return nil, fmt.Errorf("empty path")
	}
	var out []string
	for i, part := range strings.Split(strings.ReplaceAll(strings.ReplaceAll(s, "…", "..."), "...", ".\x00."), ".") {
		if part == "\x00" {
			out = append(out, "**")
			continue
		}
		m := pathSegment.FindStringSubmatch(part)
		if m == nil || (m[1] == "" && (i == 0 || m[2] == "")) {
			return nil, fmt.Errorf("%q is not a field path segment", part)
		}
		if m[1] != "" {
			out = append(out, m[1])
		}
		for range strings.Count(m[2], "[") {
			out = append(out, "[]")
		}
	}
	return out, nil
}

// hasPath reports whether p exists below the schema s. A name descends
// into a property; on a list it descends into its items first (kubectl
// explain does so); on a map (additionalProperties) it is any key. "[]"
// descends into a list's items or a map's values. "**" stands for any
// number of named segments (see descendant). Below x-kubernetes-preserve-unknown-fields anything
// exists.
func hasPath(s *apiextensionsv1.JSONSchemaProps, p []string) bool {
	if s == nil {
		return false
	}
	if len(p) == 0 {
		return true
	}
	if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
		return true
	}
	if p[0] == "**" {
		return descendant(s, p[1:])
	}
	if s.Type == "array" && s.Items != nil && s.Items.Schema != nil {
		if p[0] == "[]" {
			return hasPath(s.Items.Schema, p[1:])
		}
		return hasPath(s.Items.Schema, p)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		if _, named := s.Properties[p[0]]; !named {
			return hasPath(s.AdditionalProperties.Schema, p[1:])
		}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Allows && s.AdditionalProperties.Schema == nil {
		return true // any value, of any shape
	}
	if p[0] == "[]" {
		return false
	}
	child, ok := s.Properties[p[0]]
	if !ok {
		return false
	}
	return hasPath(&child, p[1:])
}

// descendant reports whether p exists at some depth below s, reached
// through named properties and list items only: an elision in the docs
// stands for fields that exist, not for what a free-form value might
// hold.
func descendant(s *apiextensionsv1.JSONSchemaProps, p []string) bool {
	if len(p) == 0 {
		return true
	}
	if s.Type == "array" && s.Items != nil && s.Items.Schema != nil {
		return descendant(s.Items.Schema, p)
	}
	if child, ok := s.Properties[p[0]]; ok && hasPath(&child, p[1:]) {
		return true
	}
	for name := range s.Properties {
		child := s.Properties[name]
		if descendant(&child, p) {
			return true
		}
	}
	return false
}
