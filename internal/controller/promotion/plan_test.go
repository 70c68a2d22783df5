package promotion_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stackyard/stackyard/internal/change"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/pipelinectl"
)

// tokenProject is project(version) writing "<version>-<token>", token
// being a secret configuration value.
func tokenProject(version string) string {
	return strings.Replace(project(version+"-${token}"), "config:\n", "config:\n  token:\n    type: string\n    secret: true\n", 1)
}

// TestPlanIntegrity changes an input between the preview and the apply:
// the Secret a Stack's secretsRef reads. An approval for the digest with
// the changed Secret lets the promotion start, but the Stack's up is held
// to the plan the preview saved, so it is refused ("violates plan") and
// the file the test provider writes is untouched.
// The promotion fails asking for a new one, without failing the release.
// The plans hold the secret only as ciphertext, and no secret value
// reaches a message.
func TestPlanIntegrity(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	repo := newProgramRepo(t)
	c1 := repo.Commit("main", map[string]string{"Pulumi.yaml": tokenProject("v1")})
	c2 := repo.Commit("main", map[string]string{"Pulumi.yaml": tokenProject("v2")})
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "web-token", Namespace: ns}, StringData: map[string]string{"token": "approved-token-3f9a"}}
	create(t, token)
	s, file := gitStack(t, ns, "web", repo.URL, c1)
	s.Spec.SecretRefs = map[string]shared.ResourceRef{"web:token": shared.NewSecretResourceRef("web-token", "token")}
	create(t, s)
	deployed(t, ns, "web", c1)
	g.Expect(readFile(g, file)).To(Equal("v1-approved-token-3f9a"))

	create(t, pipeline(ns, repo.URL))
	create(t, release(ns, "r2", c2, time.Now()))
	create(t, stage(ns, "prod", []string{"web"}, func(spec *promotionv1alpha1.StageSpec) {
		spec.Approval = &promotionv1alpha1.ApprovalPolicy{Required: 1, AllowSelfApproval: true}
	}))
	create(t, askFor(ns, "to-prod", "prod", "r2", false))
	p := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "to-prod"}}
	waitMessage(t, p, "waiting for approval: 0 of 1")
	g.Expect(p.Status.Previews).To(ConsistOf(SatisfyAll(
		HaveField("Plan", change.PlanSecretName("to-prod", "web")),
		HaveField("Changes", ConsistOf(HaveField("Properties", ConsistOf("content")))),
	)))

	// The promotion holds the plan in a Secret of its own; the secret
	// value in it is ciphertext.
	plan := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: p.Status.Previews[0].Plan}, plan)).To(Succeed())
	g.Expect(metav1.IsControlledBy(plan, p)).To(BeTrue(), "%+v %s", plan.OwnerReferences, p.UID)
	g.Expect(string(plan.Data[autov1alpha1.PlanKey])).To(SatisfyAll(ContainSubstring(`"ciphertext"`), Not(ContainSubstring("approved-token-3f9a"))))
	g.Expect(plan.Annotations).To(HaveKeyWithValue(change.PlanCommitAnnotation, c2))

	// The input changes, and someone approves. An approval given for the
	// digest from before the change does not count, and is given again;
	// either way the promotion starts with the plan of the old preview.
	previewed := p.Status.PlanDigest
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(token), token)).To(Succeed())
	token.StringData = map[string]string{"token": "changed-token-77c1"}
	g.Expect(env.Client.Update(ctx, token)).To(Succeed())
	admin, err := pipelinectl.New(env.Config, ns)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = admin.Decide(ctx, pipelinectl.Decision{Promotion: p.Name, Comment: "looks right"})
	g.Expect(err).NotTo(HaveOccurred())
	waitFor(t, p, time.Minute, func(g Gomega, p *promotionv1alpha1.Promotion) {
		g.Expect(p.Status.Phase != promotionv1alpha1.PromotionPending || strings.HasPrefix(p.Status.Message, "inputs changed since approval")).To(BeTrue())
	})
	if p.Status.Phase == promotionv1alpha1.PromotionPending {
		g.Expect(p.Status.PlanDigest).NotTo(Equal(previewed))
		_, err = admin.Decide(ctx, pipelinectl.Decision{Promotion: p.Name, Comment: "approved again, on the old preview"})
		g.Expect(err).NotTo(HaveOccurred())
	}

	done := waitFinished(t, ns, p.Name, opTimeout)
	g.Expect(done.Status.Phase).To(Equal(promotionv1alpha1.PromotionFailed))
	g.Expect(done.Status.Message).To(SatisfyAll(
		HavePrefix("Stack web: the update was refused because the inputs changed since the preview that was approved"),
		ContainSubstring("promote again for a new preview and new approvals"),
		ContainSubstring("violates plan: properties changed (values withheld)"),
	))
	g.Expect(readFile(g, file)).To(Equal("v1-approved-token-3f9a"), "the refused update changed the file")

	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	get(g, stack)
	g.Expect(stack.Spec.Commit).To(Equal(c2))
	g.Expect(stack.Annotations).To(SatisfyAll(
		HaveKeyWithValue(change.PlanAnnotation, plan.Name), HaveKeyWithValue(change.PlanCommitAnnotation, c2)))
	upd := &autov1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: done.Status.Stacks[0].Update}}
	get(g, upd)
	g.Expect(upd.Spec.PlanSecret).To(Equal(plan.Name))
	r := &promotionv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r2"}}
	get(g, r)
	g.Expect(r.Status.FailedIn).NotTo(HaveKey("prod"), "the release did not fail; its inputs changed")

	texts := fmt.Sprintf("%s\n%s\n%s\n%s", done.Status.Message, stack.Status.LastUpdate.Message, upd.Status.Message, logs.String())
	for _, secret := range []string{"approved-token-3f9a", "changed-token-77c1"} {
		g.Expect(texts).NotTo(ContainSubstring(secret), "a secret value leaked into a message or log")
	}
}
