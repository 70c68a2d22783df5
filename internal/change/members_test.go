package change

import (
	"slices"
	"strings"
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
		unselected  []string
		wantErr     bool
	}{{
		name:    "named only: as spec.stacks lists them, whatever they say",
		stage:   stage([]string{"pinned", "db-eu"}, nil),
		members: []string{"pinned", "db-eu"},
	}, {
		name:        "selected: the consenting ones, by name; the others listed; one bound to the stage but not selected listed too",
		stage:       stage(nil, &metav1.LabelSelector{MatchLabels: web}),
		members:     []string{"web-eu", "web-us"},
		unconsented: []string{"web-ap", "web-qa"},
		unselected:  []string{"db-eu"},
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
		unselected:  []string{"web-eu", "web-us"},
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
			if got := names(m); !slices.Equal(got, tt.members) {
				t.Errorf("members %v, want %v", got, tt.members)
			}
			if !slices.Equal(m.Unconsented, tt.unconsented) {
				t.Errorf("unconsented %v, want %v", m.Unconsented, tt.unconsented)
			}
			if !slices.Equal(m.Unselected, tt.unselected) {
				t.Errorf("unselected %v, want %v", m.Unselected, tt.unselected)
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
// it; and a Stack no stage governs, which a preview-only stage that names
// it may preview, is not selected by its labels alone.
func TestMembersOfAPreviewStage(t *testing.T) {
	st := &promotionv1alpha1.Stage{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "try"},
		Spec:       promotionv1alpha1.StageSpec{PreviewOnly: true, StackSelector: &metav1.LabelSelector{}},
	}
	previews := pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "a",
		Annotations: map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: "prod", promotionv1alpha1.PreviewStagesAnnotation: "try"}}}
	deploys := pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "b",
		Annotations: map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: "prod"}}}
	ungoverned := pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "c"}}
	m, err := Members(st, []pulumiv1.Stack{deploys, previews, ungoverned})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names(m), []string{"a"}) || !slices.Equal(m.Unconsented, []string{"b", "c"}) {
		t.Errorf("members %v, unconsented %v; want [a] and [b c]", names(m), m.Unconsented)
	}
	if Includes(st, &ungoverned) {
		t.Error("an ungoverned Stack is included by its labels alone")
	}
}

func TestMembershipProblem(t *testing.T) {
	for _, tt := range []struct {
		m    Membership
		want string
	}{
		{Membership{Bindings: []promotionv1alpha1.StackBinding{{Name: "a"}}}, ""},
		{Membership{}, "spec.stacks and spec.stackSelector: stage edge deploys no Stack"},
		{Membership{Bindings: []promotionv1alpha1.StackBinding{{Name: "a"}}, Unselected: []string{"b", "c"}},
			"spec.stackSelector: Stacks b, c are bound to stage edge"},
	} {
		got := tt.m.Problem("edge")
		if (tt.want == "") != (got == "") || !strings.HasPrefix(got, tt.want) {
			t.Errorf("Problem(%+v) = %q, want it to begin with %q", tt.m, got, tt.want)
		}
	}
}

// names are the names of m's member Stacks, in order.
func names(m Membership) []string {
	out := make([]string, len(m.Bindings))
	for i, b := range m.Bindings {
		out[i] = b.Name
	}
	return out
}
