package promotion_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/pipelinectl"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// pageUpdate fires when the preview updates the content of the test
// program's page.
const pageUpdate = "changes.exists(c, c.stack == 'web' && c.op == 'update' && c.type == 'stackyardtest:index:File' && 'content' in c.properties)"

// editStage changes the spec of stage ns/name as a governor, and waits
// until the Stage controller has handled the change.
func editStage(t *testing.T, ns, name string, edit func(*promotionv1alpha1.StageSpec)) {
	t.Helper()
	g := NewWithT(t)
	st := &promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	g.Eventually(func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(st), st); err != nil {
			return err
		}
		edit(&st.Spec)
		return env.Client.Update(context.Background(), st)
	}, time.Minute, 250*time.Millisecond).Should(Succeed())
	generation := st.Generation
	waitFor(t, st, time.Minute, func(g Gomega, st *promotionv1alpha1.Stage) {
		g.Expect(st.Status.ObservedGeneration).To(BeNumerically(">=", generation))
	})
}

// TestPolicyGates runs a stage's policy rules on real previews: rules that
// do not fire let the promotion run as before, with their results
// recorded; a Refuse rule that fires fails the next promotion before
// anything changed; a rule that cannot be compiled stalls the stage and
// fails its promotion, naming the field.
func TestPolicyGates(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo := newProgramRepo(t)
	c0, c1, c2 := repo.commit("v0"), repo.commit("v1"), repo.commit("v2")
	stack, file := gitStack(t, ns, "web", repo.URL, c0)
	create(t, stack)
	create(t, pipeline(ns, repo.URL))
	base := time.Now().Add(-time.Hour)
	create(t, release(ns, "r1", c1, base))
	create(t, release(ns, "r2", c2, base.Add(time.Minute)))
	create(t, stage(ns, "prod", []string{"web"}, func(s *promotionv1alpha1.StageSpec) {
		s.Policies = []promotionv1alpha1.PolicyRule{
			{Name: "deletes", Expression: "counts.delete > 0", Action: promotionv1alpha1.PolicyRefuse},
			{Name: "big", Expression: "counts.total > 20", Action: promotionv1alpha1.PolicyRequireApproval,
				Approval: &promotionv1alpha1.RuleApproval{Required: 1}},
		}
	}))
	deployed(t, ns, "web", c0)

	// No rule fires: the promotion runs as it would without them.
	create(t, askFor(ns, "prod-1", "prod", "r1", false))
	done := waitFinished(t, ns, "prod-1", opTimeout)
	g.Expect(done.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), done.Status.Message)
	g.Expect(done.Status.Policies).To(Equal([]promotionv1alpha1.PolicyResult{
		{Name: "deletes", Action: promotionv1alpha1.PolicyRefuse},
		{Name: "big", Action: promotionv1alpha1.PolicyRequireApproval},
	}))
	g.Expect(readFile(g, file)).To(Equal("v1"))

	// A governor adds a rule that refuses any change to the page.
	editStage(t, ns, "prod", func(s *promotionv1alpha1.StageSpec) {
		s.Policies = append(s.Policies, promotionv1alpha1.PolicyRule{
			Name: "page", Expression: pageUpdate, Action: promotionv1alpha1.PolicyRefuse, Message: "the page is frozen",
		})
	})
	create(t, askFor(ns, "prod-2", "prod", "r2", false))
	done = waitFinished(t, ns, "prod-2", opTimeout)
	g.Expect(done.Status.Phase).To(Equal(promotionv1alpha1.PromotionFailed))
	g.Expect(done.Status.Message).To(Equal("refused by policy page: the page is frozen; nothing was changed"))
	g.Expect(done.Status.Stacks).To(BeEmpty(), "nothing was pinned")
	g.Expect(previewsOf(g, done)).To(ConsistOf(HaveField("Summary", Not(BeNil()))))
	g.Expect(done.Status.Policies).To(ContainElement(promotionv1alpha1.PolicyResult{
		Name: "page", Fired: true, Action: promotionv1alpha1.PolicyRefuse, Message: "the page is frozen",
	}))
	live := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	get(g, live)
	g.Expect(live.Spec.Commit).To(Equal(c1))
	g.Expect(readFile(g, file)).To(Equal("v1"))
	r2 := &promotionv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r2"}}
	waitFor(t, r2, time.Minute, func(g Gomega, r *promotionv1alpha1.Release) {
		g.Expect(r.Status.FailedIn).To(HaveKey("prod"))
	})

	// A rule that does not compile stalls the stage and fails the
	// promotion, naming the field; the release is not blamed.
	editStage(t, ns, "prod", func(s *promotionv1alpha1.StageSpec) {
		s.Policies = []promotionv1alpha1.PolicyRule{{Name: "typo", Expression: "changes.exists(c, c.op == )", Action: promotionv1alpha1.PolicyRefuse}}
	})
	waitFor(t, &promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"}}, time.Minute,
		func(g Gomega, st *promotionv1alpha1.Stage) {
			g.Expect(sreconcile.IsStalled(st.Status.Conditions)).To(BeTrue())
			g.Expect(st.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("spec.policies[typo].expression"))))
		})
	create(t, release(ns, "r3", c2, base.Add(2*time.Minute)))
	create(t, askFor(ns, "prod-3", "prod", "r3", false))
	done = waitFinished(t, ns, "prod-3", opTimeout)
	g.Expect(done.Status.Phase).To(Equal(promotionv1alpha1.PromotionFailed))
	g.Expect(done.Status.Message).To(HavePrefix("stage prod: spec.policies[typo].expression: "))
	g.Expect(done.Status.Stacks).To(BeEmpty())
	r3 := &promotionv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r3"}}
	get(g, r3)
	g.Expect(r3.Status.FailedIn).NotTo(HaveKey("prod"))
}

// TestPolicyApprovals: a stage without an approval policy whose rule
// fires needs the rule's approvals, 2 from group dba: the requester's own
// approval does not count, nor one from outside the group, and the
// promotion runs once two others from dba approved.
func TestPolicyApprovals(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	repo := newProgramRepo(t)
	c0, c1 := repo.commit("v0"), repo.commit("v1")
	stack, file := gitStack(t, ns, "web", repo.URL, c0)
	create(t, stack)
	create(t, pipeline(ns, repo.URL))
	create(t, release(ns, "r1", c1, time.Now().Add(-time.Hour)))
	create(t, stage(ns, "prod", []string{"web"}, func(s *promotionv1alpha1.StageSpec) {
		s.Policies = []promotionv1alpha1.PolicyRule{{
			Name: "page-update", Expression: pageUpdate, Action: promotionv1alpha1.PolicyRequireApproval, Message: "the page changes",
			Approval: &promotionv1alpha1.RuleApproval{Required: 2, From: []promotionv1alpha1.Approver{{Group: "dba"}}},
		}}
	}))
	deployed(t, ns, "web", c0)

	decide, read, approve := allow("approvals", "create"), allow("promotions", "get"), allow("stages", "get", "approve")
	rita := actAs(t, ns, "rita", []string{"dba"}, approve, allow("promotions", "get", "create"), decide)
	dora := actAs(t, ns, "dora", []string{"dba"}, approve, read, decide)
	fred := actAs(t, ns, "fred", []string{"dba"}, approve, read, decide)
	mallory := actAs(t, ns, "mallory", []string{"dev"}, approve, read, decide)
	give := func(who *pipelinectl.Client, p *promotionv1alpha1.Promotion) {
		t.Helper()
		_, err := who.Decide(ctx, pipelinectl.Decision{Promotion: p.Name, Comment: "fine"})
		g.Expect(err).NotTo(HaveOccurred())
	}
	waiting := func(p *promotionv1alpha1.Promotion, parts ...string) {
		t.Helper()
		waitFor(t, p, time.Minute, func(g Gomega, p *promotionv1alpha1.Promotion) {
			g.Expect(p.Status.Phase).To(Equal(promotionv1alpha1.PromotionPending))
			for _, part := range parts {
				g.Expect(p.Status.Message).To(ContainSubstring(part))
			}
		})
	}

	p, err := rita.Promote(ctx, pipelinectl.Request{Stage: "prod", Release: "r1", Reason: "ship r1"})
	g.Expect(err).NotTo(HaveOccurred())
	waiting(p, "waiting for approval: policy page-update needs 2 of group dba: 0 so far")
	g.Expect(p.Status.Policies).To(Equal([]promotionv1alpha1.PolicyResult{{
		Name: "page-update", Fired: true, Action: promotionv1alpha1.PolicyRequireApproval, Message: "the page changes",
		Required: 2, From: []promotionv1alpha1.Approver{{Group: "dba"}},
	}}))
	give(rita, p)
	give(mallory, p)
	waiting(p, "waiting for approval: policy page-update needs 2 of group dba: 0 so far; not counted: ",
		"rita (asked for the promotion)", "mallory (not among the approvers of the stage)")
	give(dora, p)
	waiting(p, "waiting for approval: policy page-update needs 2 of group dba: 1 so far; not counted: ")
	g.Expect(readFile(g, file)).To(Equal("v0"))
	give(fred, p)
	done := waitFinished(t, ns, p.Name, opTimeout)
	g.Expect(done.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), done.Status.Message)
	g.Expect(done.Status.Approvals).To(ConsistOf(HaveField("User", "dora"), HaveField("User", "fred")))
	g.Expect(readFile(g, file)).To(Equal("v1"))

	// The history shows the rule that fired, after the request.
	admin, err := pipelinectl.New(env.Config, ns)
	g.Expect(err).NotTo(HaveOccurred())
	history, err := admin.History(ctx, "prod")
	g.Expect(err).NotTo(HaveOccurred())
	var events []string
	for _, e := range history {
		events = append(events, e.Event)
	}
	g.Expect(events[:2]).To(Equal([]string{promotionv1alpha1.EventPromotionRequested, promotionv1alpha1.EventPolicyFired}))
	g.Expect(history[1]).To(SatisfyAll(HaveField("Policy", "page-update"), HaveField("Phase", "RequireApproval"),
		HaveField("Message", "the page changes"), HaveField("Promotion", p.Name)))
}

// TestPolicyRefusesPreviewStage: a preview-only stage judges its previews
// too: a Refuse rule that fires fails its promotion, so the release is not
// verified there.
func TestPolicyRefusesPreviewStage(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo := newProgramRepo(t)
	c0, c1 := repo.commit("v0"), repo.commit("v1")
	stack, _ := gitStack(t, ns, "web", repo.URL, c0)
	create(t, stack)
	create(t, pipeline(ns, repo.URL))
	create(t, release(ns, "r1", c1, time.Now().Add(-time.Hour)))
	deployed(t, ns, "web", c0)
	create(t, stage(ns, "prod-preview", []string{"web"}, func(s *promotionv1alpha1.StageSpec) {
		s.PreviewOnly = true
		s.Policies = []promotionv1alpha1.PolicyRule{{Name: "page", Expression: pageUpdate, Action: promotionv1alpha1.PolicyRefuse}}
	}))
	create(t, askFor(ns, "preview-1", "prod-preview", "r1", false))
	done := waitFinished(t, ns, "preview-1", opTimeout)
	g.Expect(done.Status.Phase).To(Equal(promotionv1alpha1.PromotionFailed))
	g.Expect(done.Status.Message).To(Equal("refused by policy page: page; nothing was changed"), "the message defaults to the name")
	r1 := &promotionv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r1"}}
	get(g, r1)
	g.Expect(r1.Status.VerifiedIn).NotTo(HaveKey("prod-preview"))
}
