package docscheck

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePath(t *testing.T) {
	tests := []struct {
		path    string
		want    []string
		wantErr bool
	}{
		{"spec.stacks[0].config", []string{"spec", "stacks", "[]", "config"}, false},
		{"spec.secretsRef[app:password].secret", []string{"spec", "secretsRef", "[]", "secret"}, false},
		{"status.history[].changes", []string{"status", "history", "[]", "changes"}, false},
		{"status.pullRequests...stacks[].recorded", []string{"status", "pullRequests", "**", "stacks", "[]", "recorded"}, false},
		{"spec.git.…", []string{"spec", "git"}, false},
		{"spec.gitAuth…", []string{"spec", "gitAuth"}, false},
		{"spec..x", nil, true},
		{"spec.a b", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, err := ParsePath(tt.path)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want one: %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestCRDs checks the name and schema lookups on the real CRDs, both
// ways: a lookup that accepted everything would pass the docs.
func TestCRDs(t *testing.T) {
	crds := checker(t).CRDs
	kind := func(t *testing.T, name string) CRD {
		t.Helper()
		i := slices.IndexFunc(crds, func(c CRD) bool { return c.Names.Kind == name })
		if i < 0 {
			t.Fatalf("no CRD of kind %s", name)
		}
		return crds[i]
	}
	t.Run("names", func(t *testing.T) {
		tests := []struct {
			kind     string
			resource Resource
			want     bool
		}{
			{"Stack", "stacks", true},
			{"Stack", "stack", true},
			{"Stack", "Stack", true},
			{"Stack", "stacks.pulumi.com", true},
			{"Stack", "stacks.v1.pulumi.com", true},
			{"Stack", "stackyard", true}, // a category
			{"Stack", "stacks.auto.pulumi.com", false},
			{"Stack", "stak", false},
			{"Promotion", "sypromotion", true},
			{"Approval", "syapproval", true},
			{"Approval", "approvals.promotion.stackyard.dev", true},
		}
		for _, tt := range tests {
			if got := kind(t, tt.kind).Matches(tt.resource); got != tt.want {
				t.Errorf("%s matches %q: %v, want %v", tt.kind, tt.resource, got, tt.want)
			}
		}
	})
	t.Run("paths", func(t *testing.T) {
		tests := []struct {
			kind string
			path string
			want bool
		}{
			{"Stack", "spec.projectRepo", true},
			{"Stack", "spec.projectRepository", false},
			{"Stack", "status.lastUpdate.state", true},
			{"Stack", "status.lastUpdate.nope", false},
			{"Stack", "status.conditions[0].reason", true},
			{"Stack", "status.conditions.reason", true}, // kubectl explain descends lists
			{"Stack", "status.conditions[].nope", false},
			{"Stack", "spec.secretsRef[app:x].secret", true}, // a map's value
			{"Stack", "spec.projectRepo[0]", false},          // a string has no items
			{"Stack", "status.outputs.anything.below", true}, // preserve-unknown-fields
			{"Stack", "metadata.annotations", true},
			{"Stack", "spec...name", true},
			{"Stack", "spec...nothingNamedSo", false},
			{"Workspace", "spec.podTemplate.spec.volumes", true},
			{"Approval", "spec.promotion", true},
		}
		for _, tt := range tests {
			p, err := ParsePath(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if got := kind(t, tt.kind).HasPath(p); got != tt.want {
				t.Errorf("%s has %s: %v, want %v", tt.kind, tt.path, got, tt.want)
			}
		}
		if !slices.Contains(kind(t, "Approval").Selectable, "spec.promotion") {
			t.Errorf("Approval's selectable fields %v lack spec.promotion", kind(t, "Approval").Selectable)
		}
	})
}
