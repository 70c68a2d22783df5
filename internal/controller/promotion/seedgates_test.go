package promotion_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/pipelinectl"
	"github.com/stackyard/stackyard/test/testenv"
)

// TestSeedPipelineWithGates is the seed's Kargo pipeline, driven by a
// commit: gate → (preview → dev, preview → dev2) → two gates with All →
// preview → qa. In stackyard every promotion previews first, and the
// seed's gate stages are approval policies: the first gate is a preview
// stage over the dev Stacks that a developer approves once; the two QA
// gates become qa's one policy requiring both the functional and the
// security group. Approvals are given through the CLI's logic by
// impersonated users who hold the verb, and refused for one who does not.
func TestSeedPipelineWithGates(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	repo := newProgramRepo(t)
	c0 := repo.commit("v0")
	files := map[string]string{}
	for _, name := range []string{"dev", "dev2", "qa"} {
		stack, file := gitStack(t, ns, name, repo.URL, c0)
		create(t, stack)
		files[name] = file
	}
	p := pipeline(ns, repo.URL)
	p.Spec.Git.Branch = "main"
	p.Spec.Interval = &metav1.Duration{Duration: 2 * time.Second}
	create(t, p)
	gateStage := stage(ns, "gate", []string{"dev", "dev2"}, func(s *promotionv1alpha1.StageSpec) {
		autoPromote(s)
		s.PreviewOnly = true
		s.Approval = &promotionv1alpha1.ApprovalPolicy{Required: 1, From: []promotionv1alpha1.Approver{{Group: "developers"}}}
	})
	create(t, gateStage)
	for _, name := range []string{"dev", "dev2"} {
		create(t, stage(ns, name, []string{name}, func(s *promotionv1alpha1.StageSpec) {
			autoPromote(s)
			s.Sources = promotionv1alpha1.ReleaseSources{Stages: []string{"gate"}}
		}))
	}
	// Bound to their stages, the dev Stacks are governed: their governors
	// let the gate preview them.
	g.Expect(testenv.AuthorizeStacks(ctx, env.Client, gateStage)).To(Succeed())
	create(t, stage(ns, "qa", []string{"qa"}, func(s *promotionv1alpha1.StageSpec) {
		autoPromote(s)
		s.Sources = promotionv1alpha1.ReleaseSources{Stages: []string{"dev", "dev2"}, AvailabilityStrategy: promotionv1alpha1.All}
		s.Approval = &promotionv1alpha1.ApprovalPolicy{
			Required: 2, RequireEach: true,
			From: []promotionv1alpha1.Approver{{Group: "functional"}, {Group: "security"}},
		}
	}))
	approver := func(user, group string) *pipelinectl.Client {
		return actAs(t, ns, user, []string{group}, allow("stages", "approve"), allow("promotions", "get"), allow("approvals", "create"))
	}
	dana, alice, bob := approver("dana", "developers"), approver("alice", "functional"), approver("bob", "security")
	mallory := actAs(t, ns, "mallory", []string{"developers"}, allow("promotions", "get"), allow("approvals", "create"))
	approve := func(who *pipelinectl.Client, p *promotionv1alpha1.Promotion) {
		t.Helper()
		_, err := who.Decide(ctx, pipelinectl.Decision{Promotion: p.Name, Comment: "looks right"})
		g.Expect(err).NotTo(HaveOccurred())
	}

	// A commit becomes a release, which the gate previews on both dev
	// Stacks and holds for a developer's approval.
	c1 := repo.commit("v1")
	r1 := "web-" + c1[:10]
	gate := awaitApproval(t, ns, "gate", r1)
	g.Expect(previewsOf(g, gate)).To(HaveLen(2))
	for _, pv := range previewsOf(g, gate) {
		g.Expect(pv.Summary).NotTo(BeNil())
		g.Expect(pv.Summary.Update).To(BeNumerically("==", 1), "%s: the preview shows the page's new content", pv.Name)
	}
	_, err := mallory.Decide(ctx, pipelinectl.Decision{Promotion: gate.Name})
	g.Expect(err).To(MatchError(ContainSubstring(`needs the verb "approve"`)))
	g.Expect(readFile(g, files["dev"])).To(Equal("v0"), "nothing changes before the approval")
	approve(dana, gate)
	done := waitPromotionOf(t, ns, "gate", r1)
	g.Expect(done.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), done.Status.Message)
	g.Expect(readFile(g, files["dev"])).To(Equal("v0"), "a preview stage changes nothing")

	// dev and dev2 take it by themselves, each previewed before its update.
	for _, name := range []string{"dev", "dev2"} {
		done := waitPromotionOf(t, ns, name, r1)
		g.Expect(done.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), done.Status.Message)
		g.Expect(previewsOf(g, done)).To(HaveLen(1))
		g.Expect(readFile(g, files[name])).To(Equal("v1"))
	}

	// qa takes it only once both verified it, and runs once both QA groups
	// approved.
	qa := awaitApproval(t, ns, "qa", r1)
	release := &promotionv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r1}}
	get(g, release)
	for _, up := range []string{"dev", "dev2"} {
		g.Expect(qa.CreationTimestamp.Time).NotTo(BeTemporally("<", release.Status.VerifiedIn[up].Since.Time),
			"qa asked for %s before %s verified it", r1, up)
	}
	approve(alice, qa)
	waitFor(t, qa, time.Minute, func(g Gomega, p *promotionv1alpha1.Promotion) {
		g.Expect(p.Status.Message).To(ContainSubstring("needs one from group security"))
	})
	g.Expect(readFile(g, files["qa"])).To(Equal("v0"))
	approve(bob, qa)
	done = waitPromotionOf(t, ns, "qa", r1)
	g.Expect(done.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), done.Status.Message)
	g.Expect(done.Status.Approvals).To(HaveLen(2))
	g.Expect(readFile(g, files["qa"])).To(Equal("v1"))
}

// awaitApproval waits until stage has a promotion of releaseName that is
// previewed and waits for approval, and returns it.
func awaitApproval(t *testing.T, ns, stageName, releaseName string) *promotionv1alpha1.Promotion {
	t.Helper()
	var found *promotionv1alpha1.Promotion
	NewWithT(t).Eventually(func(g Gomega) {
		found = nil
		for _, p := range promotionsOf(g, ns, stageName) {
			if p.Spec.Release == releaseName && p.Status.Phase == promotionv1alpha1.PromotionPending {
				found = &p
			}
		}
		g.Expect(found).NotTo(BeNil(), "no pending promotion of %s into %s yet", releaseName, stageName)
		g.Expect(found.Status.PlanDigest).NotTo(BeEmpty(), "not previewed yet")
		g.Expect(found.Status.Message).To(HavePrefix("waiting for approval"))
	}, opTimeout, 250*time.Millisecond).Should(Succeed(), func() string { return describeNamespace(ns) })
	return found
}
