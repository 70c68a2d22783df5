package policy_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// TestInterventions: halting, resuming or aborting a promotion needs the
// verb operate on its stage (on that stage only, where the role names
// it), is done in one's own name, and the record never changes; only the
// operator, and Kubernetes' garbage collector and namespace controller,
// delete it.
func TestInterventions(t *testing.T) {
	ns := env.NewNamespace(t, "policy-")
	ctx := context.Background()
	interventions := rule("interventions", "create", "get", "update", "delete")
	alice := asMember(t, ns, "alice", nil, interventions, rule("stages", "operate"))
	bob := asMember(t, ns, "bob", nil, interventions, rule("stages", "approve"))
	carol := asMember(t, ns, "carol", nil, interventions, rbacv1.PolicyRule{
		APIGroups: []string{promotionv1alpha1.GroupVersion.Group}, Resources: []string{"stages"}, ResourceNames: []string{"dev"}, Verbs: []string{"operate"},
	})
	intervention := func(name, user, stage string, action promotionv1alpha1.InterventionAction) *promotionv1alpha1.Intervention {
		return &promotionv1alpha1.Intervention{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       promotionv1alpha1.InterventionSpec{Promotion: "prod-1", Stage: stage, Action: action, User: user},
		}
	}
	g := NewWithT(t)
	// Refusals first: the policy may take a moment to load.
	eventually(t, func() error { return bob.Create(ctx, intervention("bob", "bob", "prod", promotionv1alpha1.Abort)) }).
		Should(MatchError(ContainSubstring(`spec.stage: halting, resuming or aborting a promotion into stage prod needs the verb "operate" on stages.promotion.stackyard.dev, which bob is not allowed`)))
	g.Expect(carol.Create(ctx, intervention("carol", "carol", "prod", promotionv1alpha1.Resume))).To(MatchError(ContainSubstring("spec.stage")),
		"carol may operate stage dev only")
	g.Expect(alice.Create(ctx, intervention("as-bob", "bob", "prod", promotionv1alpha1.Halt))).
		To(MatchError(ContainSubstring(`spec.user: must be the name you are authenticated as, "alice"`)))
	g.Expect(alice.Create(ctx, intervention("jump", "alice", "prod", "Jump"))).To(MatchError(ContainSubstring("spec.action")))

	halt := intervention("alice", "alice", "prod", promotionv1alpha1.Halt)
	g.Expect(alice.Create(ctx, halt)).To(Succeed())
	g.Expect(carol.Create(ctx, intervention("carol-dev", "carol", "dev", promotionv1alpha1.Halt))).To(Succeed())

	// A record: it never changes, and only the operator deletes it.
	halt.Spec.Action = promotionv1alpha1.Resume
	g.Expect(alice.Update(ctx, halt)).To(MatchError(ContainSubstring("an Intervention is a record")))
	g.Expect(alice.Delete(ctx, intervention("alice", "alice", "prod", promotionv1alpha1.Halt))).
		To(MatchError(ContainSubstring("a record of change management")))

	// Kubernetes deletes them by itself: the garbage collector once their
	// Promotion is gone, the namespace controller with their namespace.
	gc := as(t, ns, "system:serviceaccount:kube-system:generic-garbage-collector", interventions)
	g.Expect(gc.Delete(ctx, intervention("alice", "alice", "prod", promotionv1alpha1.Halt))).To(Succeed())
	nsc := as(t, ns, "system:serviceaccount:kube-system:namespace-controller", interventions)
	g.Expect(nsc.Delete(ctx, intervention("carol-dev", "carol", "dev", promotionv1alpha1.Halt))).To(Succeed())
}
