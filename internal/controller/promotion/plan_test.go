package promotion_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	"github.com/stackyard/stackyard/internal/controller/promotion"
	"github.com/stackyard/stackyard/internal/pipelinectl"
)

// tokenProject is project(version) writing "<version>-<token>", token
// being a secret configuration value.
func tokenProject(version string) string {
	return strings.Replace(project(version+"-${token}"), "config:\n", "config:\n  token:\n    type: string\n    secret: true\n", 1)
}

// TestApproveAgain changes an input between the preview and the approval:
// the Secret a Stack's secretsRef reads. The approval given then does not
// start the promotion with the old preview's plan, which the engine would
// refuse ("violates plan"): the Stack is previewed again, in a second
// round with a plan of its own, and the approvers are asked again. The
// approval of the new plan deploys it, the promotion succeeds and the
// stage runs the release. The plans hold the secret only as ciphertext,
// and no secret value reaches a message.
func TestApproveAgain(t *testing.T) {
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
		HaveField("Plan", change.PlanSecretName("to-prod", "web", 1)),
		HaveField("Changes", ConsistOf(HaveField("Properties", ConsistOf("content")))),
	)))

	// The promotion holds the plan in a Secret of its own; the secret
	// value in it is ciphertext.
	plan := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: p.Status.Previews[0].Plan}, plan)).To(Succeed())
	g.Expect(metav1.IsControlledBy(plan, p)).To(BeTrue(), "%+v %s", plan.OwnerReferences, p.UID)
	g.Expect(string(plan.Data[autov1alpha1.PlanKey])).To(SatisfyAll(ContainSubstring(`"ciphertext"`), Not(ContainSubstring("approved-token-3f9a"))))
	g.Expect(plan.Annotations).To(HaveKeyWithValue(change.PlanCommitAnnotation, c2))

	// The input changes, and someone approves, on what they saw: the
	// approval is for the old plan and does not start the promotion. The
	// Stack is previewed again with the new Secret.
	previewed := p.Status.PlanDigest
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(token), token)).To(Succeed())
	token.StringData = map[string]string{"token": "changed-token-77c1"}
	g.Expect(env.Client.Update(ctx, token)).To(Succeed())
	admin, err := pipelinectl.New(env.Config, ns)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = admin.Decide(ctx, pipelinectl.Decision{Promotion: p.Name, Comment: "looks right"})
	g.Expect(err).NotTo(HaveOccurred())
	p = waitFor(t, p, opTimeout, func(g Gomega, p *promotionv1alpha1.Promotion) {
		g.Expect(p.Status.Phase).To(Equal(promotionv1alpha1.PromotionPending))
		g.Expect(p.Status.Previews).To(ConsistOf(SatisfyAll(HaveField("Round", int32(2)), HaveField("Summary", Not(BeNil())))))
		g.Expect(p.Status.Message).To(HavePrefix("inputs changed since approval; approve again; waiting for approval: 0 of 1"))
	})
	g.Expect(p.Status.PlanDigest).NotTo(Equal(previewed))
	g.Expect(p.Status.Previews[0].Plan).To(Equal(change.PlanSecretName("to-prod", "web", 2)))
	g.Expect(eventReasons(g, ns, "Promotion", p.Name)).To(ContainElement(promotion.EventPreviewAgain))
	g.Expect(readFile(g, file)).To(Equal("v1-approved-token-3f9a"), "nothing ran before the new approval")

	// Approved again, on the new preview: its plan is the one that runs.
	_, err = admin.Decide(ctx, pipelinectl.Decision{Promotion: p.Name, Comment: "approved again, on the new preview"})
	g.Expect(err).NotTo(HaveOccurred())
	done := waitFinished(t, ns, p.Name, opTimeout)
	g.Expect(done.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), describe(done))
	g.Expect(done.Status.Approvals).To(ConsistOf(HaveField("Comment", "approved again, on the new preview")))
	g.Expect(readFile(g, file)).To(Equal("v2-changed-token-77c1"))

	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	get(g, stack)
	g.Expect(stack.Spec.Commit).To(Equal(c2))
	g.Expect(stack.Annotations).To(SatisfyAll(
		HaveKeyWithValue(change.PlanAnnotation, done.Status.Previews[0].Plan), HaveKeyWithValue(change.PlanCommitAnnotation, c2)))
	upd := &autov1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: done.Status.Stacks[0].Update}}
	get(g, upd)
	g.Expect(upd.Spec.PlanSecret).To(Equal(done.Status.Previews[0].Plan))
	r := &promotionv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r2"}}
	get(g, r)
	g.Expect(r.Status.CurrentlyIn).To(HaveKey("prod"), "the stage runs the release")

	texts := fmt.Sprintf("%s\n%s\n%s\n%s\n%s", done.Status.Message, describe(done), stack.Status.LastUpdate.Message, upd.Status.Message, logs.String())
	for _, secret := range []string{"approved-token-3f9a", "changed-token-77c1"} {
		g.Expect(texts).NotTo(ContainSubstring(secret), "a secret value leaked into a message or log")
	}
}

// TestPromoteAgain promotes a release whose up fails on an input (the
// path the Stack writes, read from a ConfigMap, is under a regular file),
// fixes the input and promotes the same release again. The second pin
// changes no generation (the commit is the same; only the plan
// annotations change), so the Stack's failure in the first promotion must
// not count for the second: the pin's reconcile request makes the Stack
// run the second promotion's plan, the promotion succeeds and the stage
// runs the release.
func TestPromoteAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	repo := newProgramRepo(t)
	c1, c2 := repo.commit("v1"), repo.commit("v2")
	s, file := gitStack(t, ns, "web", repo.URL, c1)
	blocker := filepath.Join(filepath.Dir(file), "blocker")
	g.Expect(os.WriteFile(blocker, nil, 0o644)).To(Succeed())
	paths := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-paths", Namespace: ns}, Data: map[string]string{"path": file}}
	create(t, paths)
	delete(s.Spec.Config, "web:path")
	s.Spec.ConfigRef = map[string]shared.ConfigMapRef{"web:path": {Name: "web-paths", Key: "path"}}
	s.Spec.RetryMaxBackoffDurationSeconds = 1
	create(t, s)
	deployed(t, ns, "web", c1)

	create(t, pipeline(ns, repo.URL))
	create(t, release(ns, "r2", c2, time.Now()))
	create(t, stage(ns, "prod", []string{"web"}, nil))
	paths.Data["path"] = filepath.Join(blocker, "page.txt")
	g.Expect(env.Client.Update(ctx, paths)).To(Succeed())
	create(t, askFor(ns, "first", "prod", "r2", false))
	first := waitFinished(t, ns, "first", opTimeout)
	g.Expect(first.Status.Phase).To(Equal(promotionv1alpha1.PromotionFailed), describe(first))
	g.Expect(readFile(g, file)).To(Equal("v1"))

	paths.Data["path"] = file
	g.Expect(env.Client.Update(ctx, paths)).To(Succeed())
	create(t, askFor(ns, "second", "prod", "r2", false))
	second := waitFinished(t, ns, "second", opTimeout)
	g.Expect(second.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), describe(second))
	g.Expect(readFile(g, file)).To(Equal("v2"))

	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	get(g, stack)
	g.Expect(stack.Annotations).To(SatisfyAll(
		HaveKeyWithValue(change.PlanAnnotation, second.Status.Previews[0].Plan),
		HaveKeyWithValue(shared.ReconcileRequestAnnotation, promotion.PinRequest(second))))
	g.Expect(stack.Status.LastUpdate.ReconcileRequest).To(Equal(promotion.PinRequest(second)))
	g.Expect(second.Status.Stacks).To(ConsistOf(HaveField("Update", stack.Status.LastUpdate.Name)))
	upd := &autov1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: stack.Status.LastUpdate.Name}}
	get(g, upd)
	g.Expect(upd.Spec.PlanSecret).To(Equal(second.Status.Previews[0].Plan), "the second promotion's plan ran")
	r := &promotionv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r2"}}
	get(g, r)
	g.Expect(r.Status.CurrentlyIn).To(HaveKeyWithValue("prod", HaveField("Promotion", "second")))
}
