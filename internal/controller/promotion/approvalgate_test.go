package promotion_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/pipelinectl"
)

// TestApprovalGate runs a stage that requires two approvals, one from
// group qa and one from group security, with people acting through the
// stackyard CLI's logic as impersonated users on the real API server:
// someone without the verb approve is refused by the API server, the
// requester's own approval does not count, and the promotion runs only
// once both groups approved. A Secret the Stack reads that changes after
// the approvals were given makes them stop counting before anything is
// applied; a rejection fails the promotion, touching nothing; `stackyard
// history` shows every decision.
func TestApprovalGate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	repo := newProgramRepo(t)
	c0, c1, c2, c3 := repo.commit("v0"), repo.commit("v1"), repo.commit("v2"), repo.commit("v3")

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns}, StringData: map[string]string{"password": "first"}}
	create(t, secret)
	stack, file := gitStack(t, ns, "web", repo.URL, c0)
	stack.Spec.EnvRefs = map[string]shared.ResourceRef{"DB_PASSWORD": shared.NewSecretResourceRef("db", "password")}
	create(t, stack)
	create(t, pipeline(ns, repo.URL))
	base := time.Now().Add(-time.Hour)
	for i, sha := range []string{c1, c2, c3} {
		create(t, release(ns, fmt.Sprintf("r%d", i+1), sha, base.Add(time.Duration(i)*time.Minute)))
	}
	create(t, stage(ns, "prod", []string{"web"}, func(s *promotionv1alpha1.StageSpec) {
		s.Approval = &promotionv1alpha1.ApprovalPolicy{
			Required: 2, From: []promotionv1alpha1.Approver{{Group: "qa"}, {Group: "security"}}, RequireEach: true,
		}
	}))
	g.Eventually(func(g Gomega) string { return readFile(g, file) }, opTimeout, time.Second).Should(Equal("v0"))

	decide := allow("approvals", "create")
	readPromotions := allow("promotions", "get")
	rita := actAs(t, ns, "rita", []string{"qa"}, allow("stages", "get", "approve"), allow("promotions", "get", "create"), decide)
	alice := actAs(t, ns, "alice", []string{"qa"}, allow("stages", "approve"), readPromotions, decide)
	bob := actAs(t, ns, "bob", []string{"security"}, allow("stages", "approve"), readPromotions, decide)
	mallory := actAs(t, ns, "mallory", []string{"dev"}, readPromotions, decide)
	admin, err := pipelinectl.New(env.Config, ns)
	g.Expect(err).NotTo(HaveOccurred())

	approve := func(who *pipelinectl.Client, p *promotionv1alpha1.Promotion, comment string) {
		t.Helper()
		_, err := who.Decide(ctx, pipelinectl.Decision{Promotion: p.Name, Comment: comment})
		g.Expect(err).NotTo(HaveOccurred())
	}
	const waiting = "waiting for approval: 0 of 2 (needs one from group qa and one from group security)"

	// Rita asks for r1. Nothing happens until qa and security approved.
	first, err := rita.Promote(ctx, pipelinectl.Request{Stage: "prod", Release: "r1", Reason: "ship r1"})
	g.Expect(err).NotTo(HaveOccurred())
	waitMessage(t, first, waiting)
	g.Expect(first.Status.PlanDigest).To(HavePrefix("sha256:"))
	_, err = mallory.Decide(ctx, pipelinectl.Decision{Promotion: first.Name})
	g.Expect(err).To(MatchError(ContainSubstring(`needs the verb "approve" on stages.promotion.stackyard.dev, which mallory is not allowed`)))
	approve(rita, first, "my own")
	waitMessage(t, first, waiting+"; not counted: rita (asked for the promotion)")
	approve(alice, first, "tested in qa")
	waitMessage(t, first, "waiting for approval: 1 of 2 (needs one from group security); not counted: rita (asked for the promotion)")
	g.Expect(readFile(g, file)).To(Equal("v0"))
	approve(bob, first, "")
	done := waitFinished(t, ns, first.Name, opTimeout)
	g.Expect(done.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), done.Status.Message)
	g.Expect(done.Status.Approvals).To(ConsistOf(
		SatisfyAll(HaveField("User", "alice"), HaveField("Groups", ContainElement("qa")), HaveField("Comment", "tested in qa"),
			HaveField("Decision", promotionv1alpha1.Approve)),
		SatisfyAll(HaveField("User", "bob"), HaveField("Groups", ContainElement("security"))),
	))
	for _, a := range done.Status.Approvals {
		g.Expect(done.Status.StartTime.Time).NotTo(BeTemporally("<", a.Time.Time), "it started before %s approved", a.User)
	}
	g.Expect(readFile(g, file)).To(Equal("v1"))

	// r2 is approved by both, but the Secret the Stack reads changes
	// before the promotion starts: the approvals no longer count.
	second, err := rita.Promote(ctx, pipelinectl.Request{Stage: "prod", Release: "r2"})
	g.Expect(err).NotTo(HaveOccurred())
	waitMessage(t, second, waiting)
	approved := second.Status.PlanDigest
	approve(alice, second, "")
	waitMessage(t, second, "waiting for approval: 1 of 2 (needs one from group security)")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
	secret.StringData = map[string]string{"password": "second"}
	g.Expect(env.Client.Update(ctx, secret)).To(Succeed())
	approve(bob, second, "")
	waitMessage(t, second, "inputs changed since approval; approve again; "+waiting)
	g.Expect(second.Status.PlanDigest).NotTo(Equal(approved))
	g.Expect(second.Status.Approvals).To(BeEmpty())
	g.Expect(second.Status.StartTime).To(BeNil())
	approve(alice, second, "again")
	approve(bob, second, "again")
	done = waitFinished(t, ns, second.Name, opTimeout)
	g.Expect(done.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), done.Status.Message)
	g.Expect(done.Status.Approvals).To(HaveEach(HaveField("Comment", "again")))
	g.Expect(readFile(g, file)).To(Equal("v2"))

	// r3 is rejected: the promotion fails, and nothing changes.
	third, err := rita.Promote(ctx, pipelinectl.Request{Stage: "prod", Release: "r3"})
	g.Expect(err).NotTo(HaveOccurred())
	waitMessage(t, third, waiting)
	_, err = bob.Decide(ctx, pipelinectl.Decision{Promotion: third.Name, Reject: true})
	g.Expect(err).To(MatchError(ContainSubstring("a rejection needs a reason")))
	approve(alice, third, "fine by qa")
	_, err = bob.Decide(ctx, pipelinectl.Decision{Promotion: third.Name, Reject: true, Comment: "the plan replaces the database"})
	g.Expect(err).NotTo(HaveOccurred())
	done = waitFinished(t, ns, third.Name, time.Minute)
	g.Expect(done.Status.Phase).To(Equal(promotionv1alpha1.PromotionFailed))
	g.Expect(done.Status.Message).To(Equal("rejected by bob: the plan replaces the database"))
	g.Expect(done.Status.Stacks).To(BeEmpty())
	g.Expect(done.Status.StartTime).To(BeNil(), "a rejected promotion never started")
	g.Expect(done.Status.Approvals).To(ContainElement(SatisfyAll(
		HaveField("User", "bob"), HaveField("Decision", promotionv1alpha1.Reject), HaveField("Comment", "the plan replaces the database"))))
	live := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	get(g, live)
	g.Expect(live.Spec.Commit).To(Equal(c2))
	g.Expect(readFile(g, file)).To(Equal("v2"))
	_, err = alice.Decide(ctx, pipelinectl.Decision{Promotion: third.Name})
	g.Expect(err).To(MatchError(ContainSubstring("is Failed: there is nothing left to decide")))

	// The history shows each decision, in order, with who made it.
	history, err := admin.History(ctx, "prod")
	g.Expect(err).NotTo(HaveOccurred())
	var trail []string
	for _, e := range history {
		if e.Promotion == third.Name {
			trail = append(trail, fmt.Sprintf("%s %s %s", e.Event, e.By, e.Message))
		}
	}
	g.Expect(trail).To(Equal([]string{
		"PromotionRequested rita ",
		"ApprovalGiven alice fine by qa",
		"ApprovalRejected bob the plan replaces the database",
		"PromotionFinished  rejected by bob: the plan replaces the database",
	}))
}

// actAs returns a stackyard CLI client acting as user, member of groups,
// granted rules in ns.
func actAs(t *testing.T, ns, user string, groups []string, rules ...rbacv1.PolicyRule) *pipelinectl.Client {
	t.Helper()
	cfg, err := env.Impersonate(context.Background(), ns, user, groups, rules...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pipelinectl.New(cfg, ns)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// allow is a rule granting verbs on a resource of the promotion API.
func allow(resource string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{promotionv1alpha1.GroupVersion.Group}, Resources: []string{resource}, Verbs: verbs}
}

// waitMessage waits until p is Pending with message, and reads it into p.
func waitMessage(t *testing.T, p *promotionv1alpha1.Promotion, message string) {
	t.Helper()
	waitFor(t, p, time.Minute, func(g Gomega, p *promotionv1alpha1.Promotion) {
		g.Expect(p.Status.Phase).To(Equal(promotionv1alpha1.PromotionPending))
		g.Expect(p.Status.Message).To(Equal(message))
		// The fact alerts, the dashboard and the APIs read is typed.
		g.Expect(p.AwaitsApproval()).To(Equal(strings.Contains(message, "waiting for approval")), "status.reason %q", p.Status.Reason)
	})
}
