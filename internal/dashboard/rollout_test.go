package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// TestRolloutPageAndInterventions: a promotion's page shows its rollout
// wave by wave and why it halted; alice, who may operate the stage,
// resumes it from the page, and the Intervention names her; bob, who may
// not, is refused with the policy's reason.
func TestRolloutPageAndInterventions(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	csrf := csrfOf(t, tokens["alice"])
	promote := url.Values{"namespace": {nsA}, "stage": {"qa"}, "release": {"web-bbbbbbb"}, "_csrf": {csrf}}
	code, body, h := postForm(t, baseURL, "/actions/promote", tokens["alice"], promote, nil)
	g.Expect(code).To(Equal(http.StatusSeeOther), body)
	name := strings.TrimPrefix(strings.SplitN(h.Get("Location"), "?", 2)[0], "/promotions/team-a/")

	// Halted in wave 2 of 3, as the Promotion controller records it.
	var p promotionv1alpha1.Promotion
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: nsA, Name: name}, &p)).To(Succeed())
	now := metav1.Now()
	p.Status.Phase, p.Status.StartTime, p.Status.Reason = promotionv1alpha1.PromotionRunning, &now, promotionv1alpha1.PromotionReasonHalted
	p.Status.Stacks = []promotionv1alpha1.PromotedStack{
		{Name: "eu", Commit: "b", Wave: 1, State: promotionv1alpha1.StackSucceeded},
		{Name: "us", Commit: "b", Wave: 2, State: promotionv1alpha1.StackFailed, Message: "update failed"},
		{Name: "ap", Commit: "b", Wave: 3, State: promotionv1alpha1.StackPending},
	}
	halt := "the failure budget is spent: 1 Stack failed, the budget is 0 (us)"
	p.Status.Rollout = &promotionv1alpha1.RolloutStatus{
		Waves: 3, Wave: 2, Halted: halt, Counts: promotionv1alpha1.RolloutCounts{Succeeded: 1, Failed: 1, Pending: 1},
		Halts: []promotionv1alpha1.RolloutHalt{{Time: now, Reason: halt}},
		Verification: &promotionv1alpha1.WaveVerification{Wave: 1, Attempt: 2, VerificationStatus: promotionv1alpha1.VerificationStatus{
			Phase: "Succeeded", StartTime: &now, Message: "verification check health passed",
		}},
	}
	g.Expect(env.Client.Status().Update(ctx, &p)).To(Succeed())
	var page string
	g.Eventually(func(g Gomega) {
		code, page, _ = get(t, baseURL, "/promotions/team-a/"+name, tokens["bob"])
		g.Expect(code).To(Equal(http.StatusOK))
		g.Expect(page).To(ContainSubstring(`id="halted"`))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect(page).To(ContainSubstring("Wave 2 of 3"))
	g.Expect(page).To(MatchRegexp(`(?s)data-wave="2".*?data-stack="us".*?Failed`))
	// Each wave has its bar; wave 1 shows its checks, which passed on
	// their second attempt.
	g.Expect(page).To(MatchRegexp(`(?s)data-wave="1".*?<rect class="seg succeeded" x="0.00" y="0" width="100.00".*?data-checks="Succeeded">Checks Succeeded \(attempt 2\): verification check health passed`))
	g.Expect(page).To(MatchRegexp(`(?s)data-wave="2".*?<rect class="seg failed" x="0.00" y="0" width="100.00".*?data-wave="3"`))
	g.Expect(page).NotTo(MatchRegexp(`(?s)data-wave="2".*?data-checks=`), "only the wave checked shows checks")
	g.Expect(page).To(ContainSubstring(`id="resume"`))
	g.Expect(page).To(ContainSubstring(halt))

	// bob may create Interventions but not operate stages.
	resume := url.Values{"namespace": {nsA}, "promotion": {name}, "reason": {"the quota was raised"}, "_csrf": {csrfOf(t, tokens["bob"])}}
	code, body, _ = postForm(t, baseURL, "/actions/resume", tokens["bob"], resume, nil)
	g.Expect(code).To(Equal(http.StatusForbidden), body)
	g.Expect(body).To(ContainSubstring(`needs the verb &#34;operate&#34; on stages.promotion.stackyard.dev`))
	resume.Set("_csrf", csrf)
	code, body, _ = postForm(t, baseURL, "/actions/resume", tokens["alice"], resume, nil)
	g.Expect(code).To(Equal(http.StatusSeeOther), body)
	var list promotionv1alpha1.InterventionList
	g.Expect(env.Client.List(ctx, &list, client.InNamespace(nsA))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1))
	g.Expect(list.Items[0].Spec).To(Equal(promotionv1alpha1.InterventionSpec{
		Promotion: name, Stage: "qa", Action: promotionv1alpha1.Resume, User: "system:serviceaccount:team-a:alice", Reason: "the quota was raised",
	}))
	g.Expect(list.Items[0].OwnerReferences).To(ConsistOf(HaveField("UID", p.UID)))

	// Resumed, wave 3 waits for approvals of its own (approveEachWave):
	// the page decides on that wave, and alice's approval names it.
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: nsA, Name: name}, &p)).To(Succeed())
	p.Status.Reason, p.Status.Rollout.Halted = promotionv1alpha1.PromotionReasonAwaitingApproval, ""
	p.Status.Message = "wave 3 of 3 waiting for approval: 0 of 1"
	p.Status.Rollout.Approval = &promotionv1alpha1.WaveApproval{Wave: 3, Since: now}
	p.Status.Rollout.ApprovalPolicy = &promotionv1alpha1.ApprovalPolicy{Required: 2}
	p.Status.PlanDigest = "sha256:plan"
	g.Expect(env.Client.Status().Update(ctx, &p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		code, page, _ = get(t, baseURL, "/promotions/team-a/"+name, tokens["alice"])
		g.Expect(code).To(Equal(http.StatusOK))
		g.Expect(page).To(ContainSubstring(`id="wave-decision"`))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect(page).To(ContainSubstring(`<input type="hidden" name="wave" value="3">`))
	g.Expect(page).To(MatchRegexp(`(?s)id="wave-approval" data-wave="3"><p><strong>Wave 3</strong> waits for approval since`))
	decide := url.Values{"namespace": {nsA}, "promotion": {name}, "wave": {"2"}, "comment": {"wave 2 looks fine"}, "_csrf": {csrf}}
	code, body, _ = postForm(t, baseURL, "/actions/approve", tokens["alice"], decide, nil)
	g.Expect(code).NotTo(Equal(http.StatusSeeOther), "a decision on a wave that does not wait was taken")
	g.Expect(body).To(ContainSubstring("wave 2 does not wait for approval"))
	decide.Set("wave", "3")
	code, body, _ = postForm(t, baseURL, "/actions/approve", tokens["alice"], decide, nil)
	g.Expect(code).To(Equal(http.StatusSeeOther), body)
	var approvals promotionv1alpha1.ApprovalList
	g.Expect(env.Client.List(ctx, &approvals, client.InNamespace(nsA), client.MatchingFields{"spec.promotion": name})).To(Succeed())
	g.Expect(approvals.Items).To(ConsistOf(HaveField("Spec", SatisfyAll(
		HaveField("Wave", int32(3)), HaveField("User", "system:serviceaccount:team-a:alice"), HaveField("Comment", "wave 2 looks fine")))))
}
