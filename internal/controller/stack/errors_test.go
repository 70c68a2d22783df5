package stack_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/test/argocd"
	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/testenv"
)

// TestStepErrorsReachStatus feeds each class of step error through the
// whole operator on the real API server: an object the API server refuses
// (a ValidatingAdmissionPolicy), a failed Update create, a Secret that is
// missing, a source that fails. Each must show in the Stack's status with a
// reason that says what failed and the cause in its message, first as
// Reconciling when it may pass, and as Stalled once it persists (the suite
// runs the operator with a short stall bound), which Argo CD's health check
// reads as Degraded.
func TestStepErrorsReachStatus(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares the namespace and adjusts the Stack's spec.
		setup func(t *testing.T, ns string, spec *shared.StackSpec)
		// reconciling is the Reconciling reason seen first, if the error
		// is one that may pass; empty for one that stalls at once.
		reconciling string
		// stalled is the Stalled reason once the error persists.
		stalled string
		// message is in the condition's message, both times.
		message string
	}{{
		name: "the API server refuses the Workspace",
		setup: func(t *testing.T, ns string, _ *shared.StackSpec) {
			denyInNamespace(t, ns, "workspaces", metav1.StatusReasonInvalid, "workspaces are not allowed in this namespace")
		},
		stalled: pulumiv1.WorkspaceApplyFailedReason,
		message: "workspaces are not allowed in this namespace",
	}, {
		name: "creating the Update is forbidden",
		setup: func(t *testing.T, ns string, _ *shared.StackSpec) {
			denyInNamespace(t, ns, "updates", metav1.StatusReasonForbidden, "updates are frozen")
		},
		reconciling: pulumiv1.UpdateCreateFailedReason,
		stalled:     pulumiv1.UpdateCreateFailedReason,
		message:     "updates are frozen",
	}, {
		name: "a secretsRef names a missing Secret",
		setup: func(_ *testing.T, _ string, spec *shared.StackSpec) {
			spec.SecretRefs = map[string]shared.ResourceRef{"web:password": {
				SelectorType:     shared.ResourceSelectorSecret,
				ResourceSelector: shared.ResourceSelector{SecretRef: &shared.SecretSelector{Name: "db-credentials", Key: "password"}},
			}}
		},
		reconciling: pulumiv1.ReferenceNotFoundReason,
		stalled:     pulumiv1.ReferenceNotFoundReason,
		message:     `spec.secretsRef[web:password].secret: Secret "db-credentials" not found`,
	}, {
		name: "a key is set in both config and secretsRef",
		setup: func(_ *testing.T, _ string, spec *shared.StackSpec) {
			spec.SecretRefs = map[string]shared.ResourceRef{"web:message": {
				SelectorType:     shared.ResourceSelectorLiteral,
				ResourceSelector: shared.ResourceSelector{LiteralRef: &shared.LiteralRef{Value: "hi"}},
			}}
		},
		stalled: sreconcile.StalledSpecInvalidReason,
		message: "spec.secretsRef[web:message]: the key is also set in spec.config",
	}, {
		name: "the source repository does not exist",
		setup: func(t *testing.T, _ string, spec *shared.StackSpec) {
			spec.GitSource.ProjectRepo = gitserver.New(t).RepoURL("no-such-repository")
		},
		stalled: pulumiv1.StalledSourceUnavailableReason,
		message: "spec.projectRepo: NotFound",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s, _ := newFileStack(t, "failing", webProgram)
			ns := s.Namespace
			s.Spec.Config = config("hello")
			tt.setup(t, ns, &s.Spec)
			g.Expect(env.Client.Create(context.Background(), s)).To(Succeed())

			if tt.reconciling != "" {
				s = waitStack(t, ns, s.Name, opTimeout, func(g Gomega, s *pulumiv1.Stack) {
					c := findCondition(s, sreconcile.ReconcilingCondition)
					g.Expect(c).NotTo(BeNil(), "not Reconciling")
					g.Expect(c.Reason).To(Equal(tt.reconciling))
					g.Expect(c.Message).To(ContainSubstring(tt.message))
				})
				g.Expect(sreconcile.IsReady(s.Status.Conditions)).To(BeFalse())
				health, err := argocd.StackHealth(s)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(health.Status).To(Equal("Progressing"), health.Message)
			}
			s = waitStack(t, ns, s.Name, opTimeout, func(g Gomega, s *pulumiv1.Stack) {
				c := findCondition(s, sreconcile.StalledCondition)
				g.Expect(c).NotTo(BeNil(), "not Stalled")
				g.Expect(c.Reason).To(Equal(tt.stalled))
				g.Expect(c.Message).To(ContainSubstring(tt.message))
				g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
			})
			g.Expect(findCondition(s, sreconcile.ReconcilingCondition)).To(BeNil())
			health, err := argocd.StackHealth(s)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(health.Status).To(Equal("Degraded"), health.Message)
			g.Expect(health.Message).To(ContainSubstring(tt.message))
		})
	}
}

// TestMissingSecretRecovers creates the Secret a Stack names only after
// the Stack has stalled on its absence: the stall lifts by itself, since a
// missing reference is looked for again, and the Stack deploys.
func TestMissingSecretRecovers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, target := newFileStack(t, "late-secret", webProgram)
	ns := s.Namespace
	s.Spec.SecretRefs = map[string]shared.ResourceRef{"web:message": shared.NewSecretResourceRef("late", "message")}
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	waitStack(t, ns, s.Name, opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		c := findCondition(s, sreconcile.StalledCondition)
		g.Expect(c).NotTo(BeNil(), "not Stalled")
		g.Expect(c.Message).To(ContainSubstring(`Secret "late" not found`))
	})
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: ns},
		StringData: map[string]string{"message": "finally"},
	})).To(Succeed())
	waitStack(t, ns, s.Name, opTimeout, ready)
	g.Expect(readFile(g, target)).To(Equal("finally"))
}

// TestPrerequisiteCycleStalls makes two Stacks each other's prerequisite,
// which admission cannot see (it checks one object at a time): both stall,
// naming the field and the cycle, instead of waiting for each other.
func TestPrerequisiteCycleStalls(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	for _, pair := range [][2]string{{"chicken", "egg"}, {"egg", "chicken"}} {
		dir := testenv.LiveDir(t)
		g.Expect(env.Client.Create(ctx, &pulumiv1.Stack{
			ObjectMeta: metav1.ObjectMeta{Name: pair[0], Namespace: ns},
			Spec: shared.StackSpec{
				Stack:         "dev",
				Backend:       backendURL(t, dir),
				Config:        config("hello"),
				GitSource:     programSource(t, pair[0], program(filepath.Join(dir, "page.txt"), false)),
				Prerequisites: []shared.PrerequisiteRef{{Name: pair[1]}},
			},
		})).To(Succeed())
	}
	for _, name := range []string{"chicken", "egg"} {
		s := waitStack(t, ns, name, opTimeout, func(g Gomega, s *pulumiv1.Stack) {
			c := findCondition(s, sreconcile.StalledCondition)
			g.Expect(c).NotTo(BeNil(), "not Stalled")
			g.Expect(c.Reason).To(Equal(sreconcile.StalledSpecInvalidReason))
			g.Expect(c.Message).To(ContainSubstring("spec.prerequisites[0]"))
			g.Expect(c.Message).To(ContainSubstring("chicken"))
			g.Expect(c.Message).To(ContainSubstring("egg"))
		})
		g.Expect(s.Status.LastUpdate).To(BeNil(), "nothing may run in a cycle")
	}
}

// TestAdmissionRejectsAmbiguousSpecs feeds specs that could only fail
// later through the real API server: each is refused at once, the error
// naming the field at fault, and nothing is stored. (A key of config set
// again elsewhere is beyond CEL, which cannot type config's free-form
// values: TestStepErrorsReachStatus shows that it stalls.)
func TestAdmissionRejectsAmbiguousSpecs(t *testing.T) {
	secretRef := shared.ResourceRef{
		SelectorType:     shared.ResourceSelectorSecret,
		ResourceSelector: shared.ResourceSelector{SecretRef: &shared.SecretSelector{Name: "s", Key: "k"}},
	}
	tests := []struct {
		name   string
		mutate func(s *pulumiv1.Stack)
		want   string // in the error; empty: accepted
	}{
		{name: "distinct keys are accepted", mutate: func(s *pulumiv1.Stack) {
			s.Spec.Config = config("hello")
			s.Spec.SecretRefs = map[string]shared.ResourceRef{"web:password": secretRef}
		}},
		{name: "configRef and secretsRef", mutate: func(s *pulumiv1.Stack) {
			s.Spec.ConfigRef = map[string]shared.ConfigMapRef{"web:a": {Name: "cm", Key: "k"}}
			s.Spec.SecretRefs = map[string]shared.ResourceRef{"web:a": secretRef}
		}, want: "spec.secretsRef[web:a]: the key is also set in spec.configRef"},
		{name: "configRef and secrets", mutate: func(s *pulumiv1.Stack) {
			s.Spec.ConfigRef = map[string]shared.ConfigMapRef{"web:a": {Name: "cm", Key: "k"}}
			s.Spec.Secrets = map[string]string{"web:a": "x"}
		}, want: "spec.secrets[web:a]: the key is also set in spec.configRef"},
		{name: "secrets and secretsRef", mutate: func(s *pulumiv1.Stack) {
			s.Spec.Secrets = map[string]string{"web:a": "x"}
			s.Spec.SecretRefs = map[string]shared.ResourceRef{"web:a": secretRef}
		}, want: "spec.secretsRef[web:a]: the key is also set in spec.secrets"},
		{name: "itself as prerequisite", mutate: func(s *pulumiv1.Stack) {
			s.Spec.Prerequisites = []shared.PrerequisiteRef{{Name: "other"}, {Name: s.Name}}
		}, want: "spec.prerequisites: a Stack cannot be its own prerequisite"},
		{name: "too many prerequisites", mutate: func(s *pulumiv1.Stack) {
			for i := range 65 {
				s.Spec.Prerequisites = append(s.Spec.Prerequisites, shared.PrerequisiteRef{Name: fmt.Sprintf("p%d", i)})
			}
		}, want: "spec.prerequisites"},
	}
	ns := newNamespace(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := &pulumiv1.Stack{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("spec-%d", i), Namespace: ns},
				Spec:       shared.StackSpec{Stack: "dev", ProgramRef: &shared.ProgramReference{Name: "absent"}},
			}
			tt.mutate(s)
			err := env.Client.Create(context.Background(), s)
			if tt.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tt.want))
			g.Expect(getStack(g, ns, s.Name)).To(BeNil(), "a refused Stack was stored")
		})
	}
}

// denyInNamespace installs a ValidatingAdmissionPolicy, with its binding,
// that refuses every create and update of resource (of auto.pulumi.com) in
// ns with the given reason and message, and removes both when the test
// ends.
func denyInNamespace(t *testing.T, ns, resource string, reason metav1.StatusReason, message string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	name := "deny-" + resource + "-" + ns
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
				ResourceRules: []admissionv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
						Rule: admissionv1.Rule{
							APIGroups: []string{"auto.pulumi.com"}, APIVersions: []string{"*"}, Resources: []string{resource},
						},
					},
				}},
			},
			Validations: []admissionv1.Validation{{Expression: "false", Message: message, Reason: &reason}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	g.Expect(env.Client.Create(ctx, policy)).To(Succeed())
	g.Expect(env.Client.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, binding)
		_ = env.Client.Delete(ctx, policy)
	})
	// The policy takes effect once the API server has loaded it: probe
	// with a dry-run create until it is refused.
	g.Eventually(func() error {
		return env.Client.Create(ctx, probeObject(ns, resource), client.DryRunAll)
	}, opTimeout, 250*time.Millisecond).Should(MatchError(ContainSubstring(message)))
}

// probeObject is a minimal object of resource ("workspaces" or "updates")
// in ns, for a dry-run create.
func probeObject(ns, resource string) client.Object {
	meta := metav1.ObjectMeta{Name: "probe", Namespace: ns}
	if resource == "workspaces" {
		return &autov1alpha1.Workspace{ObjectMeta: meta, Spec: autov1alpha1.WorkspaceSpec{Local: &autov1alpha1.LocalSource{Dir: "/probe"}}}
	}
	return &autov1alpha1.Update{ObjectMeta: meta}
}
