package change

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

func TestMembers(t *testing.T) {
	// stack is a Stack of namespace apps with labels, consenting to the
	// stage named by consent ("" for none).
	stack := func(name, consent string, labels map[string]string) pulumiv1.Stack {
		s := pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, Labels: labels}}
		if consent != "" {
			s.Annotations = map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: consent}
		}
		return s
	}
	web := map[string]string{"app": "web"}
	stage := func(names []string, sel *metav1.LabelSelector) *promotionv1alpha1.Stage {
		st := &promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "edge"}}
		for _, n := range names {
			st.Spec.Stacks = append(st.Spec.Stacks, promotionv1alpha1.StackBinding{Name: n})
		}
		st.Spec.StackSelector = sel
		return st
	}
	stacks := []pulumiv1.Stack{
		stack("web-us", "edge", web),
		stack("web-eu", "edge", web),
		stack("web-ap", "", web),                 // matches, no consent
		stack("web-qa", "qa", web),               // matches, consents elsewhere
		stack("db-eu", "edge", nil),              // consents, does not match
		stack("pinned", "", map[string]string{}), // named, no consent
	}
	other := stack("web-xx", "edge", web)
	other.Namespace = "elsewhere"
	stacks = append(stacks, other)

	tests := []struct {
		name        string
		stage       *promotionv1alpha1.Stage
		members     []string
		unconsented []string
		wantErr     bool
	}{{
		name:    "named only: as spec.stacks lists them, whatever they say",
		stage:   stage([]string{"pinned", "db-eu"}, nil),
		members: []string{"pinned", "db-eu"},
	}, {
		name:        "selected: the consenting ones, by name; the others listed",
		stage:       stage(nil, &metav1.LabelSelector{MatchLabels: web}),
		members:     []string{"web-eu", "web-us"},
		unconsented: []string{"web-ap", "web-qa"},
	}, {
		name:        "named and selected: named first, a Stack both named and selected once",
		stage:       stage([]string{"web-us", "db-eu"}, &metav1.LabelSelector{MatchLabels: web}),
		members:     []string{"web-us", "db-eu", "web-eu"},
		unconsented: []string{"web-ap", "web-qa"},
	}, {
		name: "an expression",
		stage: stage(nil, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpDoesNotExist},
		}}),
		members:     []string{"db-eu"},
		unconsented: []string{"pinned"},
	}, {
		name:  "an invalid selector",
		stage: stage([]string{"pinned"}, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}),
		// What is named stays named.
		members: []string{"pinned"},
		wantErr: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Members(tt.stage, stacks)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want one: %t", err, tt.wantErr)
			}
			if got := m.Names(); !slices.Equal(got, tt.members) {
				t.Errorf("members %v, want %v", got, tt.members)
			}
			if !slices.Equal(m.Unconsented, tt.unconsented) {
				t.Errorf("unconsented %v, want %v", m.Unconsented, tt.unconsented)
			}
			// Includes says the same, Stack by Stack.
			for i := range stacks {
				st := &stacks[i]
				want := slices.Contains(tt.members, st.Name) && st.Namespace == tt.stage.Namespace
				if got := Includes(tt.stage, st); got != want {
					t.Errorf("Includes(%s/%s) = %t, want %t", st.Namespace, st.Name, got, want)
				}
			}
		})
	}
}

// TestMembersOfAPreviewStage: a preview-only stage needs a Stack's consent
// to preview it (promotion.stackyard.dev/preview-stages), not to deploy
// it.
func TestMembersOfAPreviewStage(t *testing.T) {
	st := &promotionv1alpha1.Stage{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "try"},
		Spec:       promotionv1alpha1.StageSpec{PreviewOnly: true, StackSelector: &metav1.LabelSelector{}},
	}
	previews := pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "a",
		Annotations: map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: "prod", promotionv1alpha1.PreviewStagesAnnotation: "try"}}}
	deploys := pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "b",
		Annotations: map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: "prod"}}}
	m, err := Members(st, []pulumiv1.Stack{deploys, previews})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.Names(), []string{"a"}) || !slices.Equal(m.Unconsented, []string{"b"}) {
		t.Errorf("members %v, unconsented %v; want [a] and [b]", m.Names(), m.Unconsented)
	}
}
