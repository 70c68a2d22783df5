package policy_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/test/testenv"
)

// TestEveryStackFieldIsGoverned mutates every field of the Stack CRD's
// schema, one at a time, on a governed Stack: a mutation the API server
// accepts from the administrator (a dry run, so that only valid
// mutations count) must, from a user allowed to update Stacks but not to
// govern their stage, be refused when it changes what the Stack deploys
// (its source), refused when it names what the user may not read, or
// else be accepted and held. Every one must change the digest of the
// Stack's inputs that a promotion's pin holds its up to, and the spec
// digest the operator holds changes by. The mutations are
// derived from the schema itself, so a field added to the API later is
// covered without anyone adding it here; the test fails if a top-level
// field gets no valid mutation at all.
func TestEveryStackFieldIsGoverned(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	mallory := attacker(t, f.ns, "mallory", stackRule("stacks", "get", "update", "patch"))
	spec := stackSpecSchema(t)

	prod := &pulumiv1.Stack{}
	NewWithT(t).Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "prod"}, prod)).To(Succeed())
	eventually(t, func() error {
		return mallory.Patch(ctx, prod.DeepCopy(), mergePatch(t, map[string]any{"spec": map[string]any{"commit": strings.Repeat("f", 40)}}), client.DryRunAll)
	}).Should(MatchError(ContainSubstring("is governed by stage prod")))

	covered := map[string]bool{}
	var refused, tried, invisible int
	for _, m := range mutations(nil, &spec) {
		top := m.path[0]
		if try(t, ctx, prod, mallory, m, &tried, &invisible) {
			covered[top] = true
			refused++
		}
	}
	var missed []string
	for name := range spec.Properties {
		if !covered[name] {
			missed = append(missed, name)
		}
	}
	sort.Strings(missed)
	t.Logf("%d fields, of %d at the top, mutated validly, each refused or held (%d patches tried); "+
		"%d of them changed the inputs digest, %d changed nothing the operator decodes", refused, len(spec.Properties), tried, refused-invisible, invisible)
	if len(missed) > 0 {
		t.Errorf("no valid mutation found for spec fields %v: the test must learn to make one", missed)
	}
	unchanged(t, &pulumiv1.Stack{}, prod)
}

// try sets m's field to each of its values in turn, with what the field
// excludes taken away in the same patch, until the administrator's dry
// run accepts one; that one the attacker must be refused. It reports
// whether a valid value was found, and counts in invisible the valid
// mutations the operator cannot tell apart once decoded.
func try(t *testing.T, ctx context.Context, prod *pulumiv1.Stack, mallory client.Client, m mutation, tried, invisible *int) bool {
	t.Helper()
	top := m.path[0]
	for _, value := range m.values {
		for _, clear := range [][]string{nil, {"commit"}, {"projectRepo", "commit", "branch"}} {
			patch := map[string]any{}
			for _, c := range clear {
				if c != top {
					patch[c] = nil
				}
			}
			set(patch, m.path, value)
			body := mergePatch(t, map[string]any{"spec": patch})
			*tried++
			mutated := prod.DeepCopy()
			if err := env.Client.Patch(ctx, mutated, body, client.DryRunAll); err != nil {
				// A governed Stack pins a commit: following a branch, a
				// Program or a Flux source is refused to everyone; so is
				// a TTL, which would destroy what its stage deploys.
				if strings.Contains(err.Error(), "so it must pin spec.commit") || strings.Contains(err.Error(), "so it cannot expire") {
					return true
				}
				continue
			}
			err := mallory.Patch(ctx, prod.DeepCopy(), body, client.DryRunAll)
			field := "spec." + strings.Join(m.path, ".")
			switch {
			case err == nil && sourceFields[top]:
				t.Errorf("%s = %v: a user without govern changed what the Stack deploys", field, value)
			case err == nil:
				// Accepted, and held: the operator runs nothing with it
				// until a promotion approves it (change.ApproveSpec).
			case strings.Contains(err.Error(), sourceRefusal):
				if !sourceFields[top] {
					t.Errorf("%s = %v: refused as the Stack's source, which it is not: %v", field, value, err)
				}
			case strings.Contains(err.Error(), "a change to it is previewed with everything it names"):
				// It names what mallory may not read (internal/readcheck).
			default:
				t.Errorf("%s = %v: neither held nor refused as the policies say: %v", field, value, err)
			}
			if !inputsCover(t, ctx, prod, mutated, m.path) {
				*invisible++
			}
			return true
		}
	}
	return false
}

// inputsCover checks that a valid mutation of a governed Stack's spec
// changes the digest of its inputs (change.StackDigest), which a
// promotion's pin carries and the Stack checks before its up, unless it
// changed only the commit (which the promotion itself sets) or nothing the
// operator can tell apart once decoded. It reports whether it compared.
func inputsCover(t *testing.T, ctx context.Context, prod, mutated *pulumiv1.Stack, path []string) bool {
	t.Helper()
	stripped := func(s *pulumiv1.Stack) shared.StackSpec {
		spec := *s.Spec.DeepCopy()
		if spec.GitSource != nil {
			spec.Commit = ""
		}
		return spec
	}
	if equality.Semantic.DeepEqual(stripped(prod), stripped(mutated)) {
		return false
	}
	before, err := change.StackDigest(ctx, env.Client, prod)
	if err != nil {
		t.Fatal(err)
	}
	after, err := change.StackDigest(ctx, env.Client, mutated)
	if err != nil {
		t.Fatal(err)
	}
	if before == after {
		t.Errorf("spec.%s: the mutation leaves the inputs digest as it was, so a pinned up would run it unseen", strings.Join(path, "."))
	}
	if b, a := specDigest(t, prod), specDigest(t, mutated); b == a && path[0] != "commit" {
		t.Errorf("spec.%s: the mutation leaves the spec digest as it was, so the operator would not hold it", strings.Join(path, "."))
	}
	return true
}

func specDigest(t *testing.T, s *pulumiv1.Stack) string {
	t.Helper()
	d, err := change.SpecDigest(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// sourceFields are what a governed Stack deploys: only its governors and
// its promotions change them (config/policy/stack-governance.yaml).
var sourceFields = map[string]bool{"commit": true, "projectRepo": true, "branch": true, "programRef": true, "fluxSource": true}

// sourceRefusal is the policy's answer to a change of them.
const sourceRefusal = sourceFieldsMsg + ": Stack prod is governed by stage prod and changes only through its promotions"

// stackSpecSchema is the schema of spec in the storage version of the
// Stack CRD, as make generate wrote it.
func stackSpecSchema(t *testing.T) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "pulumi.com_stacks.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Schema.OpenAPIV3Schema.Properties["spec"]
		}
	}
	t.Fatal("the Stack CRD has no storage version")
	return apiextensionsv1.JSONSchemaProps{}
}

// mutation is a field under spec, at path, and the values its schema
// allows for it, to try in turn.
type mutation struct {
	path   []string
	values []any
}

// maxCandidates bounds the values tried for one field.
const maxCandidates = 48

// mutations lists every field below s (at path): objects are recursed
// into; anything else (scalars, maps, arrays, objects kept whole) is a
// field of its own with the values candidates finds for it.
func mutations(path []string, s *apiextensionsv1.JSONSchemaProps) []mutation {
	if len(s.Properties) > 0 && len(path) < 6 {
		var out []mutation
		if len(path) > 0 { // the object whole, then each of its fields
			out = append(out, mutation{path: path, values: objectCandidates(s, 0)})
		}
		for _, name := range sortedKeys(s.Properties) {
			prop := s.Properties[name]
			out = append(out, mutations(append(slices.Clone(path), name), &prop)...)
		}
		return out
	}
	if len(path) == 0 {
		return nil
	}
	return []mutation{{path: path, values: candidates(s, 0)}}
}

func sortedKeys(m map[string]apiextensionsv1.JSONSchemaProps) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// candidates are values of schema s other than its zero value: every
// enum value; a string that fits (a duration where a pattern asks), 1, true; for an object, its required
// fields in every combination of their candidates, alone and with each
// optional field added, so that a rule such as "the field that type
// names must be set" is met by one of them.
func candidates(s *apiextensionsv1.JSONSchemaProps, depth int) []any {
	if len(s.Enum) > 0 {
		var out []any
		for _, e := range s.Enum {
			var v any
			_ = yaml.Unmarshal(e.Raw, &v)
			out = append(out, v)
		}
		return out
	}
	if s.XIntOrString {
		return []any{"1", int64(1)}
	}
	switch s.Type {
	case "string":
		if s.Format == "date-time" {
			return []any{"2026-01-02T03:04:05Z"}
		}
		if s.Pattern != "" {
			// Most patterns of the schema are durations.
			return []any{"mutated", "1h"}
		}
		return []any{"mutated"}
	case "integer", "number":
		if s.Minimum != nil {
			return []any{int64(*s.Minimum) + 1}
		}
		return []any{int64(1)}
	case "boolean":
		return []any{true}
	case "array":
		if s.Items == nil || s.Items.Schema == nil || depth > 4 {
			return []any{[]any{}}
		}
		var out []any
		for _, c := range candidates(s.Items.Schema, depth+1) {
			out = append(out, []any{c})
		}
		return out
	case "object":
		switch {
		case s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
			var out []any
			for _, c := range candidates(s.AdditionalProperties.Schema, depth+1) {
				out = append(out, map[string]any{"mutated": c})
			}
			return out
		case len(s.Properties) > 0 && depth <= 4:
			return objectCandidates(s, depth)
		}
		return []any{map[string]any{"mutated": "1"}}
	}
	return []any{"mutated"}
}

// objectCandidates combines an object's required fields, then adds each
// optional one.
func objectCandidates(s *apiextensionsv1.JSONSchemaProps, depth int) []any {
	bases := []map[string]any{{}}
	for _, name := range s.Required {
		prop := s.Properties[name]
		var next []map[string]any
		for _, base := range bases {
			for _, c := range candidates(&prop, depth+1) {
				m := maps.Clone(base)
				m[name] = c
				next = append(next, m)
			}
		}
		bases = next[:min(len(next), maxCandidates)]
	}
	var out []any
	for _, base := range bases {
		if len(base) > 0 {
			out = append(out, base)
		}
		for _, name := range sortedKeys(s.Properties) {
			if slices.Contains(s.Required, name) {
				continue
			}
			prop := s.Properties[name]
			cs := candidates(&prop, depth+1)
			for _, c := range cs[:min(len(cs), 6)] {
				m := maps.Clone(base)
				m[name] = c
				out = append(out, m)
			}
		}
	}
	return out[:min(len(out), maxCandidates)]
}

// set puts value at path in the nested map m.
func set(m map[string]any, path []string, value any) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = value
}
