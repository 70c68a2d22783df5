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
	apimeta "k8s.io/apimachinery/pkg/api/meta"
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
func tokenProject(version string) string { return projectReading(version, "token", true) }

// projectReading is project(version) writing "<version>-<value of key>",
// the configuration key declared a string, secret or not.
func projectReading(version, key string, secret bool) string {
	decl := "config:\n  " + key + ":\n    type: string\n"
	if secret {
		decl += "    secret: true\n"
	}
	return strings.Replace(project(version+"-${"+key+"}"), "config:\n", decl, 1)
}

// awaiting is a Stack web, deployed at c1, whose program (made by
// program from a version) reads the secret config value web:token from
// the Secret web-token, holding value; and a promotion to-prod of the
// release r2 (c2) into the stage prod, which asks one approval (the
// requester's own counts when self is set), previewed and waiting for it.
type awaiting struct {
	ns, c1, c2, file string
	token            *corev1.Secret
	p                *promotionv1alpha1.Promotion
}

// awaitTokenApproval sets up an awaiting promotion.
func awaitTokenApproval(t *testing.T, program func(version string) string, value string, self bool) *awaiting {
	t.Helper()
	a := &awaiting{ns: newNamespace(t)}
	repo := newProgramRepo(t)
	a.c1 = repo.Commit("main", map[string]string{"Pulumi.yaml": program("v1")})
	a.c2 = repo.Commit("main", map[string]string{"Pulumi.yaml": program("v2")})
	a.token = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "web-token", Namespace: a.ns}, StringData: map[string]string{"token": value}}
	create(t, a.token)
	var s *pulumiv1.Stack
	s, a.file = gitStack(t, a.ns, "web", repo.URL, a.c1)
	s.Spec.SecretRefs = map[string]shared.ResourceRef{"web:token": shared.NewSecretResourceRef("web-token", "token")}
	create(t, s)
	deployed(t, a.ns, "web", a.c1)

	create(t, pipeline(a.ns, repo.URL))
	create(t, release(a.ns, "r2", a.c2, time.Now()))
	create(t, stage(a.ns, "prod", []string{"web"}, func(spec *promotionv1alpha1.StageSpec) {
		spec.Approval = &promotionv1alpha1.ApprovalPolicy{Required: 1, AllowSelfApproval: self}
	}))
	create(t, askFor(a.ns, "to-prod", "prod", "r2", false))
	a.p = &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns, Name: "to-prod"}}
	waitMessage(t, a.p, "waiting for approval: 0 of 1")
	return a
}

// changeToken sets the Secret web-token's value.
func (a *awaiting) changeToken(t *testing.T, value string) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(a.token), a.token)).To(Succeed())
	a.token.StringData = map[string]string{"token": value}
	g.Expect(env.Client.Update(context.Background(), a.token)).To(Succeed())
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
	a := awaitTokenApproval(t, tokenProject, "approved-token-3f9a", true)
	ns, c2, file, p := a.ns, a.c2, a.file, a.p
	g.Expect(readFile(g, file)).To(Equal("v1-approved-token-3f9a"))
	g.Expect(previewsOf(g, p)).To(ConsistOf(SatisfyAll(
		HaveField("Plan", change.PlanSecretName("to-prod", "web", 1)),
		HaveField("Changes", ConsistOf(HaveField("Properties", ConsistOf("content")))),
	)))

	// The promotion holds the plan in a Secret of its own; the secret
	// value in it is ciphertext.
	plan := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: previewsOf(g, p)[0].Plan}, plan)).To(Succeed())
	g.Expect(metav1.IsControlledBy(plan, p)).To(BeTrue(), "%+v %s", plan.OwnerReferences, p.UID)
	g.Expect(string(plan.Data[autov1alpha1.PlanKey])).To(SatisfyAll(ContainSubstring(`"ciphertext"`), Not(ContainSubstring("approved-token-3f9a"))))
	g.Expect(plan.Annotations).To(HaveKeyWithValue(change.PlanCommitAnnotation, c2))

	// The input changes, and someone approves, on what they saw: the
	// approval is for the old plan and does not start the promotion. The
	// Stack is previewed again with the new Secret.
	previewed := p.Status.PlanDigest
	a.changeToken(t, "changed-token-77c1")
	admin, err := pipelinectl.New(env.Config, ns)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = admin.Decide(ctx, pipelinectl.Decision{Promotion: p.Name, Comment: "looks right"})
	g.Expect(err).NotTo(HaveOccurred())
	p = waitFor(t, p, opTimeout, func(g Gomega, p *promotionv1alpha1.Promotion) {
		g.Expect(p.Status.Phase).To(Equal(promotionv1alpha1.PromotionPending))
		g.Expect(previewsOf(g, p)).To(ConsistOf(SatisfyAll(HaveField("Round", int32(2)), HaveField("Summary", Not(BeNil())))))
		g.Expect(p.Status.Message).To(HavePrefix("inputs changed since approval; approve again; waiting for approval: 0 of 1"))
	})
	g.Expect(p.Status.PlanDigest).NotTo(Equal(previewed))
	g.Expect(previewsOf(g, p)[0].Plan).To(Equal(change.PlanSecretName("to-prod", "web", 2)))
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
	pin, err := change.PinDigest(previewsOf(g, done)[0].Inputs, previewsOf(g, done)[0].PlanDigest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stack.Annotations).To(SatisfyAll(
		HaveKeyWithValue(change.PlanAnnotation, previewsOf(g, done)[0].Plan), HaveKeyWithValue(change.PlanCommitAnnotation, c2),
		HaveKeyWithValue(change.InputsAnnotation, pin)), "the up ran held to the inputs the promotion previewed")
	upd := &autov1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: done.Status.Stacks[0].Update}}
	get(g, upd)
	g.Expect(upd.Spec.PlanSecret).To(Equal(previewsOf(g, done)[0].Plan))
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
	// The Stack does not retry the failed promotion's plan behind its
	// record: it waits, Stalled, for a new promotion.
	stalledFor(t, ns, "web", pulumiv1.StalledPromotionEndedReason, "promotion first", "has ended Failed")

	paths.Data["path"] = file
	g.Expect(env.Client.Update(ctx, paths)).To(Succeed())
	create(t, askFor(ns, "second", "prod", "r2", false))
	second := waitFinished(t, ns, "second", opTimeout)
	g.Expect(second.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), describe(second))
	g.Expect(readFile(g, file)).To(Equal("v2"))

	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	get(g, stack)
	g.Expect(stack.Annotations).To(SatisfyAll(
		HaveKeyWithValue(change.PlanAnnotation, previewsOf(g, second)[0].Plan),
		HaveKeyWithValue(shared.ReconcileRequestAnnotation, promotion.PinRequest(second))))
	g.Expect(stack.Status.LastUpdate.ReconcileRequest).To(Equal(promotion.PinRequest(second)))
	g.Expect(second.Status.Stacks).To(ConsistOf(HaveField("Update", stack.Status.LastUpdate.Name)))
	upd := &autov1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: stack.Status.LastUpdate.Name}}
	get(g, upd)
	g.Expect(upd.Spec.PlanSecret).To(Equal(previewsOf(g, second)[0].Plan), "the second promotion's plan ran")
	r := &promotionv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r2"}}
	get(g, r)
	g.Expect(r.Status.CurrentlyIn).To(HaveKeyWithValue("prod", HaveField("Promotion", "second")))
}

// TestInputsChangedAfterPin changes a Secret a Stack reads after its
// promotion previewed it, and pins the Stack with that promotion's plan
// and inputs as the promotion would: the Stack does not run the up (its
// program would read what nobody approved), but stalls saying why, and
// the file it writes keeps the approved release's content.
func TestInputsChangedAfterPin(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	a := awaitTokenApproval(t, tokenProject, "previewed-4be1", true)
	ns, c1, c2, file, p := a.ns, a.c1, a.c2, a.file, a.p
	pv := previewsOf(g, p)[0]
	g.Expect(pv.Inputs).To(HavePrefix("sha256:"))
	g.Expect(pv.PlanDigest).To(HavePrefix("sha256:"))

	a.changeToken(t, "swapped-after-approval-9d2c")
	inputs, err := change.PinDigest(pv.Inputs, pv.PlanDigest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(
		promotion.PinConfiguration(ns, "web", c2, pv.Plan, inputs, promotion.PinRequest(p))),
		client.FieldOwner(promotion.FieldManager), client.ForceOwnership)).To(Succeed())

	stalledFor(t, ns, "web", pulumiv1.StalledInputsChangedReason, "Secret web-token", "nothing was run")
	g.Expect(readFile(g, file)).To(Equal("v1-previewed-4be1"), "the up ran with an input nobody approved")
	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	get(g, stack)
	g.Expect(stack.Status.LastUpdate.LastSuccessfulCommit).To(Equal(c1))
	var updates autov1alpha1.UpdateList
	g.Expect(env.Client.List(ctx, &updates, client.InNamespace(ns))).To(Succeed())
	for _, u := range updates.Items {
		g.Expect(u.Spec.PlanSecret).To(BeEmpty(), "Update %s was started with the plan", u.Name)
	}
}

// stalledFor waits until the Stack ns/name is Stalled for reason, with a
// message that contains each of words.
func stalledFor(t *testing.T, ns, name, reason string, words ...string) {
	t.Helper()
	waitFor(t, &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		c := apimeta.FindStatusCondition(s.Status.Conditions, "Stalled")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(reason))
		for _, w := range words {
			g.Expect(c.Message).To(ContainSubstring(w))
		}
	})
}

// TestPlantedPlanCopy: the Secret a promotion copies a preview's plan
// into has a name anyone can work out, and anyone who may create Secrets
// may make it first, claiming the promotion as its controller. Its plan
// and diff (what the approvers would be shown and the approvals bound
// to) are not taken for the copy: the promotion fails, saying so, and
// nothing is deployed.
func TestPlantedPlanCopy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	repo := newProgramRepo(t)
	c1 := repo.Commit("main", map[string]string{"Pulumi.yaml": project("v1")})
	c2 := repo.Commit("main", map[string]string{"Pulumi.yaml": project("v2")})
	s, file := gitStack(t, ns, "web", repo.URL, c1)
	create(t, s)
	deployed(t, ns, "web", c1)
	create(t, pipeline(ns, repo.URL))
	create(t, release(ns, "r2", c2, time.Now()))
	create(t, stage(ns, "prod", []string{"web"}, func(spec *promotionv1alpha1.StageSpec) {
		spec.Approval = &promotionv1alpha1.ApprovalPolicy{Required: 1}
	}))
	p := askFor(ns, "to-prod", "prod", "r2", false)
	create(t, p)
	yes := true
	planted := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: change.PlanSecretName("to-prod", "web", 1), OwnerReferences: []metav1.OwnerReference{{
			APIVersion: promotionv1alpha1.GroupVersion.String(), Kind: "Promotion", Name: p.Name, UID: p.UID, Controller: &yes}}},
		Immutable: &yes,
		Data:      map[string][]byte{autov1alpha1.PlanKey: []byte(`{"resources":{}}`), autov1alpha1.DiffKey: []byte("nothing changes")},
	}
	g.Expect(env.Client.Create(ctx, planted)).To(Succeed())

	done := waitFinished(t, ns, "to-prod", 2*opTimeout)
	g.Expect(done.Status.Phase).To(Equal(promotionv1alpha1.PromotionFailed), describe(done))
	g.Expect(done.Status.Message).To(ContainSubstring("Secret " + planted.Name + ", where the plan of the preview of Stack web goes, " +
		"exists and is not the copy the promotion made"))
	g.Expect(readFile(g, file)).To(Equal("v1"))
}
