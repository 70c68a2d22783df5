package promotion_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/pipelinectl"
)

// TestApproveEachWave: a stage of two Stacks, one a wave, asks for an
// approval before each wave (approveEachWave), from anyone allowed the
// verb approve on it; alice is, acting through the CLI's logic as an
// impersonated user on the real API server.
//
//  1. r2's promotion waits for alice's approval, then deploys wave 1 and
//     waits again, Running with the reason AwaitingApproval, wave 2 not
//     pinned. A decision on a wave that does not wait is refused.
//  2. alice approves: her decision is of wave 2, and the rollout
//     finishes, her approval recorded in status.rollout.approval.
//  3. r3's wave 2 is rejected: the promotion ends Aborted, wave 2
//     Skipped and still on r2, and the message says so.
func TestApproveEachWave(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	repo := newProgramRepo(t)
	c1, c2, c3 := repo.commit("v1"), repo.commit("v2"), repo.commit("v3")
	files := deployedFleet(t, ns, repo.URL, c1, "a", "b")
	create(t, pipeline(ns, repo.URL))
	create(t, release(ns, "r2", c2, time.Now().Add(-time.Minute)))
	create(t, stage(ns, "fleet", []string{"a", "b"}, func(s *promotionv1alpha1.StageSpec) {
		s.Rollout = &promotionv1alpha1.Rollout{Waves: []intstr.IntOrString{intstr.FromInt32(1)}, ApproveEachWave: true}
		s.Approval = &promotionv1alpha1.ApprovalPolicy{Required: 1}
	}))
	alice := actAs(t, ns, "alice", nil, allow("stages", "approve"), allow("promotions", "get"), allow("approvals", "create"))
	decide := func(p string, d pipelinectl.Decision) *promotionv1alpha1.Approval {
		t.Helper()
		d.Promotion = p
		a, err := alice.Decide(ctx, d)
		g.Expect(err).NotTo(HaveOccurred())
		return a
	}
	waveWaits := func(name string) *promotionv1alpha1.Promotion {
		t.Helper()
		return waitFor(t, &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, opTimeout,
			func(g Gomega, p *promotionv1alpha1.Promotion) {
				g.Expect(p.WaveAwaitingApproval()).To(Equal(int32(2)), describe(p))
			})
	}

	// 1. The promotion's approval lets wave 1 go; wave 2 waits for its own.
	create(t, askFor(ns, "to-r2", "fleet", "r2", false))
	waitMessage(t, &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "to-r2"}}, "waiting for approval: 0 of 1")
	g.Expect(decide("to-r2", pipelinectl.Decision{Comment: "ship it"}).Spec.Wave).To(BeZero())
	p := waveWaits("to-r2")
	g.Expect(p.Status.Phase).To(Equal(promotionv1alpha1.PromotionRunning))
	g.Expect(p.Status.Reason).To(Equal(promotionv1alpha1.PromotionReasonAwaitingApproval))
	g.Expect(p.Status.Message).To(HavePrefix("wave 2 of 2 waiting for approval: 0 of 1; 1 succeeded, 0 failed, 0 updating, 1 pending"))
	g.Expect(p.Status.Rollout.Approval.Approvals).To(BeEmpty(), "the promotion's approval counted for wave 2")
	g.Expect(readFile(g, files["a"])).To(Equal("v2"))
	g.Expect(commitOf(g, ns, "b")).To(Equal(c1), "wave 2 was pinned before it was approved")
	_, err := alice.Decide(ctx, pipelinectl.Decision{Promotion: "to-r2", Wave: 3})
	g.Expect(err).To(MatchError(ContainSubstring("wave 3 does not wait for approval")))

	// 2. alice approves the wave that waits.
	g.Expect(decide("to-r2", pipelinectl.Decision{Comment: "wave 1 looks fine"}).Spec.Wave).To(Equal(int32(2)))
	done := waitFinished(t, ns, "to-r2", opTimeout)
	g.Expect(done.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), describe(done))
	g.Expect(done.Status.Rollout.Approval).To(HaveValue(SatisfyAll(
		HaveField("Wave", int32(2)), HaveField("ApprovedTime", Not(BeNil())),
		HaveField("Approvals", ConsistOf(SatisfyAll(HaveField("User", "alice"), HaveField("Comment", "wave 1 looks fine")))))))
	g.Expect(readFile(g, files["b"])).To(Equal("v2"))

	// 3. r3's wave 2 is rejected: the promotion is aborted there.
	create(t, release(ns, "r3", c3, time.Now()))
	create(t, askFor(ns, "to-r3", "fleet", "r3", false))
	waitMessage(t, &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "to-r3"}}, "waiting for approval: 0 of 1")
	decide("to-r3", pipelinectl.Decision{Comment: "ship it"})
	waveWaits("to-r3")
	decide("to-r3", pipelinectl.Decision{Reject: true, Comment: "wave 1's latency doubled"})
	aborted := waitFinished(t, ns, "to-r3", opTimeout)
	g.Expect(aborted.Status.Phase).To(Equal(promotionv1alpha1.PromotionAborted), describe(aborted))
	g.Expect(aborted.Status.Message).To(And(
		HavePrefix("wave 2 rejected by alice: wave 1's latency doubled; "),
		ContainSubstring("1 Stack runs release r3"),
		ContainSubstring("1 Stack runs release r2"),
	))
	g.Expect(aborted.Status.Rollout.Counts).To(Equal(promotionv1alpha1.RolloutCounts{Succeeded: 1, Skipped: 1}))
	g.Expect(commitOf(g, ns, "b")).To(Equal(c2))
	g.Expect(readFile(g, files["b"])).To(Equal("v2"))
}
