package program

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// ProjectFile is the name of the rendered project file in the artifact.
const ProjectFile = "Pulumi.yaml"

// project is a Pulumi YAML project file. Field order is the order of the
// sections in the file: what it is, then what it declares, each section's
// entries sorted by name.
type project struct {
	Name          string         `yaml:"name"`
	Runtime       string         `yaml:"runtime"`
	Packages      map[string]any `yaml:"packages,omitempty"`
	Configuration map[string]any `yaml:"configuration,omitempty"`
	Variables     map[string]any `yaml:"variables,omitempty"`
	Resources     map[string]any `yaml:"resources,omitempty"`
	Outputs       map[string]any `yaml:"outputs,omitempty"`
}

// Render turns a Program into the files of its Pulumi YAML project: a
// single Pulumi.yaml with `name: <name>`, `runtime: yaml` and the
// program's packages, configuration, variables, resources and outputs.
// The output depends only on its input (keys are sorted), so a generation
// always renders to the same bytes. A program that Pulumi would refuse for
// reasons the CRD schema cannot express is rejected with an error naming
// the field, e.g. "program.configuration.replicas.default: ...".
func Render(name string, spec *pulumiv1.ProgramSpec) (map[string][]byte, error) {
	if err := Validate(spec); err != nil {
		return nil, err
	}
	p := project{Name: name, Runtime: "yaml"}
	var err error
	if len(spec.Packages) > 0 {
		p.Packages = map[string]any{}
		for k, v := range spec.Packages {
			p.Packages[k] = v
		}
	}
	if p.Configuration, err = section(spec.Configuration); err != nil {
		return nil, fmt.Errorf("program.configuration: %w", err)
	}
	if p.Variables, err = section(spec.Variables); err != nil {
		return nil, fmt.Errorf("program.variables: %w", err)
	}
	if p.Resources, err = section(spec.Resources); err != nil {
		return nil, fmt.Errorf("program.resources: %w", err)
	}
	if p.Outputs, err = section(spec.Outputs); err != nil {
		return nil, fmt.Errorf("program.outputs: %w", err)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("encoding %s: %w", ProjectFile, err)
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return map[string][]byte{ProjectFile: buf.Bytes()}, nil
}

// section converts one section of the spec to plain YAML values through
// its JSON form, so that it reads exactly as the user wrote it (field
// names as in the CRD, omitted fields left out). Nil for an empty section.
func section[V any](m map[string]V) (map[string]any, error) {
	if len(m) == 0 {
		return nil, nil
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// decodeJSON decodes raw JSON keeping numbers exact: integers stay
// integers instead of becoming floats written as 1e+06.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return numbers(v), nil
}

// numbers replaces json.Number values by int64 or float64, recursively.
func numbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	}
	return v
}

// Validate checks what the CRD schema cannot: every resource has a type
// and does not combine get with properties, each configuration input has a
// type or a default and its default fits its type, and no name is used
// twice across configuration, variables and resources (Pulumi YAML refers
// to all three by bare name). Every problem found is reported, each
// prefixed with the path of its field.
func Validate(spec *pulumiv1.ProgramSpec) error {
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	for _, name := range sortedKeys(spec.Configuration) {
		c := spec.Configuration[name]
		field := "program.configuration." + name
		if c.Type == "" && c.Default == nil {
			fail(field, "give a type or a default")
		}
		if c.Default != nil && c.Type != "" {
			if msg := checkDefault(c.Type, c.Default); msg != "" {
				fail(field+".default", "%s", msg)
			}
		}
	}
	for _, name := range sortedKeys(spec.Resources) {
		r := spec.Resources[name]
		field := "program.resources." + name
		if strings.TrimSpace(r.Type) == "" {
			fail(field+".type", "required: the resource's Pulumi type token, e.g. aws:s3:BucketV2")
		}
		if r.Get != nil && len(r.Properties) > 0 {
			fail(field+".get", "cannot be combined with properties: a resource is either read or managed")
		}
	}
	owner := map[string]string{}
	for _, sec := range []struct {
		field string
		names []string
	}{
		{"program.configuration", sortedKeys(spec.Configuration)},
		{"program.variables", sortedKeys(spec.Variables)},
		{"program.resources", sortedKeys(spec.Resources)},
	} {
		for _, name := range sec.names {
			if first, dup := owner[name]; dup {
				fail(sec.field+"."+name, "the name is already used by %s.%s; names must be unique across configuration, variables and resources", first, name)
				continue
			}
			owner[name] = sec.field
		}
	}
	return errors.Join(errs...)
}

// checkDefault returns why def does not fit the configuration type typ, or
// "" when it does.
func checkDefault(typ pulumiv1.ConfigType, def *apiextensionsv1.JSON) string {
	v, err := decodeJSON(def.Raw)
	if err != nil {
		return "not valid JSON"
	}
	isNumber := func(e any) bool {
		switch e.(type) {
		case int64, float64:
			return true
		}
		return false
	}
	isString := func(e any) bool { _, ok := e.(string); return ok }
	listOf := func(ok func(any) bool) bool {
		l, isList := v.([]any)
		return isList && !slices.ContainsFunc(l, func(e any) bool { return !ok(e) })
	}
	fits := false
	switch typ {
	case "String":
		fits = isString(v)
	case "Number":
		fits = isNumber(v)
	case "List<String>":
		fits = listOf(isString)
	case "List<Number>":
		fits = listOf(isNumber)
	default:
		return fmt.Sprintf("unknown type %q", typ)
	}
	if !fits {
		return fmt.Sprintf("%s does not fit the type %s", def.Raw, typ)
	}
	return ""
}

// sortedKeys returns m's keys in order, so that messages are stable.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
