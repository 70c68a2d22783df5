package change

import (
	"os/exec"
	"path/filepath"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"

	"github.com/stackyard/stackyard/test/testenv"
)

// TestPoliciesSurviveKustomize: config/policy as kustomize writes it (the
// kustomize of bin/kubectl, which `kubectl apply -k` runs) is what the
// operator expects. kustomize writes YAML anew, and once wrote a folded
// scalar's more-indented line with an extra line break: the policies it
// installed were then "altered" to the operator's guard, and every gate
// held shut on a kustomize install.
func TestPoliciesSurviveKustomize(t *testing.T) {
	out, err := exec.Command(filepath.Join(testenv.BinDir(), "kubectl"), "kustomize",
		filepath.Join(testenv.RepoRoot(), "config", "policy")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/policy: %v", err)
	}
	policies, bindings, err := ExpectedPolicies()
	if err != nil {
		t.Fatal(err)
	}
	kustomized, kustomizedBindings, err := DecodePolicies(out)
	if err != nil {
		t.Fatal(err)
	}
	gotPolicies := map[string]*admissionv1.ValidatingAdmissionPolicy{}
	for i := range kustomized {
		gotPolicies[kustomized[i].Name] = &kustomized[i]
	}
	gotBindings := map[string]*admissionv1.ValidatingAdmissionPolicyBinding{}
	for i := range kustomizedBindings {
		gotBindings[kustomizedBindings[i].Name] = &kustomizedBindings[i]
	}
	for i := range policies {
		want := &policies[i]
		got, ok := gotPolicies[want.Name]
		if !ok {
			t.Errorf("kustomize left out ValidatingAdmissionPolicy %s", want.Name)
			continue
		}
		if what := policyDiffers(want, got); what != "" {
			t.Errorf("ValidatingAdmissionPolicy %s as kustomize writes it differs in %s:\nwant %+v\ngot  %+v", want.Name, what, want.Spec.Validations, got.Spec.Validations)
		}
	}
	for i := range bindings {
		want := &bindings[i]
		got, ok := gotBindings[want.Name]
		if !ok {
			t.Errorf("kustomize left out ValidatingAdmissionPolicyBinding %s", want.Name)
			continue
		}
		if what := bindingDiffers(want, got); what != "" {
			t.Errorf("ValidatingAdmissionPolicyBinding %s as kustomize writes it differs in %s", want.Name, what)
		}
	}
}
