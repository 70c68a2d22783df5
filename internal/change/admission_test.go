package change

import (
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kptr "k8s.io/utils/ptr"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// TestExpectedPolicies: the embedded config/policy parses, and each
// policy has exactly one binding.
func TestExpectedPolicies(t *testing.T) {
	policies, bindings, err := ExpectedPolicies()
	if err != nil {
		t.Fatal(err)
	}
	if len(policies) != 10 || len(bindings) != len(policies) {
		t.Fatalf("%d policies and %d bindings, want 10 of each", len(policies), len(bindings))
	}
	bound := map[string]int{}
	for _, b := range bindings {
		bound[b.Spec.PolicyName]++
	}
	for _, p := range policies {
		if bound[p.Name] != 1 {
			t.Errorf("policy %s has %d bindings, want 1", p.Name, bound[p.Name])
		}
	}
}

// TestPolicyDiffers: what the API server defaults is not a change; every
// way of weakening a policy or a binding is.
func TestPolicyDiffers(t *testing.T) {
	policies, bindings, err := ExpectedPolicies()
	if err != nil {
		t.Fatal(err)
	}
	want := &policies[0]
	stored := func(edit func(*admissionv1.ValidatingAdmissionPolicy)) *admissionv1.ValidatingAdmissionPolicy {
		live := want.DeepCopy()
		live.Spec.MatchConstraints.MatchPolicy = kptr.To(admissionv1.Equivalent)
		live.Spec.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{}
		live.Spec.MatchConstraints.ObjectSelector = &metav1.LabelSelector{}
		for i := range live.Spec.MatchConstraints.ResourceRules {
			live.Spec.MatchConstraints.ResourceRules[i].Scope = kptr.To(admissionv1.AllScopes)
		}
		if edit != nil {
			edit(live)
		}
		return live
	}
	tests := map[string]struct {
		edit func(*admissionv1.ValidatingAdmissionPolicy)
		want string
	}{
		"as stored":         {nil, ""},
		"ignore on failure": {func(p *admissionv1.ValidatingAdmissionPolicy) { p.Spec.FailurePolicy = kptr.To(admissionv1.Ignore) }, "failurePolicy is not Fail"},
		"a rule changed":    {func(p *admissionv1.ValidatingAdmissionPolicy) { p.Spec.Validations[0].Expression = "true" }, "validations"},
		"a variable changed": {func(p *admissionv1.ValidatingAdmissionPolicy) {
			p.Spec.Variables = append(p.Spec.Variables, admissionv1.Variable{Name: "x", Expression: "true"})
		}, "variables"},
		"other operations": {func(p *admissionv1.ValidatingAdmissionPolicy) {
			p.Spec.MatchConstraints.ResourceRules[0].Operations = []admissionv1.OperationType{admissionv1.Connect}
		}, "matchConstraints.resourceRules"},
		"a namespace left out": {func(p *admissionv1.ValidatingAdmissionPolicy) {
			p.Spec.MatchConstraints.NamespaceSelector.MatchLabels = map[string]string{"governed": "yes"}
		}, "matchConstraints.namespaceSelector narrows it"},
		"a match condition": {func(p *admissionv1.ValidatingAdmissionPolicy) {
			p.Spec.MatchConditions = []admissionv1.MatchCondition{{Name: "never", Expression: "false"}}
		}, "matchConditions narrow it"},
	}
	for name, tt := range tests {
		if got := policyDiffers(want, stored(tt.edit)); got != tt.want {
			t.Errorf("%s: policyDiffers = %q, want %q", name, got, tt.want)
		}
	}

	b := &bindings[0]
	for name, tt := range map[string]struct {
		edit func(*admissionv1.ValidatingAdmissionPolicyBinding)
		want string
	}{
		"as stored": {nil, ""},
		"warn only": {func(b *admissionv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Warn}
		}, "validationActions do not Deny"},
		"narrowed": {func(b *admissionv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.MatchResources = &admissionv1.MatchResources{}
		}, "matchResources narrow it"},
		"other policy": {func(b *admissionv1.ValidatingAdmissionPolicyBinding) { b.Spec.PolicyName = "allow-all" }, "policyName"},
	} {
		live := b.DeepCopy()
		if tt.edit != nil {
			tt.edit(live)
		}
		if got := bindingDiffers(b, live); got != tt.want {
			t.Errorf("%s: bindingDiffers = %q, want %q", name, got, tt.want)
		}
	}
}

func TestGated(t *testing.T) {
	tests := []struct {
		name string
		edit func(*promotionv1alpha1.StageSpec)
		want bool
	}{
		{name: "straight from the pipeline", edit: func(*promotionv1alpha1.StageSpec) {}},
		{name: "approval", edit: func(s *promotionv1alpha1.StageSpec) { s.Approval = &promotionv1alpha1.ApprovalPolicy{Required: 1} }, want: true},
		{name: "policy rules", want: true, edit: func(s *promotionv1alpha1.StageSpec) {
			s.Policies = []promotionv1alpha1.PolicyRule{{Name: "big", Expression: "counts.total > 20", Action: promotionv1alpha1.PolicyRefuse}}
		}},
		{name: "upstream stages", edit: func(s *promotionv1alpha1.StageSpec) { s.Sources.Stages = []string{"dev"} }, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &promotionv1alpha1.Stage{}
			st.Spec.Sources.Direct = true
			tt.edit(&st.Spec)
			if got := Gated(st); got != tt.want {
				t.Errorf("Gated = %v, want %v", got, tt.want)
			}
		})
	}
}
