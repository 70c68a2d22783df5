package promotion_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/change"
)

// fleetStatus is the status of a promotion into a stage of n Stacks at
// its largest: every per-Stack field at its limit (a 253-character name
// and Update, 64-character commits, a 256-byte message), the message,
// the approvals and the policy results at theirs. The previews are not
// in it: each is a StackPromotion of its own.
func fleetStatus(n int) promotionv1alpha1.PromotionStatus {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	long := func(prefix string, i, size int) string {
		s := fmt.Sprintf("%s%04d-", prefix, i)
		return s + strings.Repeat("x", size-len(s))
	}
	st := promotionv1alpha1.PromotionStatus{
		Phase: promotionv1alpha1.PromotionRunning, Message: strings.Repeat("m", 4096), Commit: strings.Repeat("c", 40),
		StartTime: &now, PlanDigest: "sha256:" + strings.Repeat("d", 64), Previewed: int32(n), //nolint:gosec // a test's small n
		Rollout: &promotionv1alpha1.RolloutStatus{Waves: 7, Wave: 4},
	}
	for i := range n {
		st.Stacks = append(st.Stacks, promotionv1alpha1.PromotedStack{
			Name: long("stack-", i, 253), PreviousCommit: strings.Repeat("a", 64), Commit: strings.Repeat("b", 64),
			Update: long("update-", i, 253), Message: strings.Repeat("e", 256), Wave: 7, State: promotionv1alpha1.StackSucceeded,
		})
		st.Rollout.Counts.Add(promotionv1alpha1.StackSucceeded)
	}
	for i := range 64 {
		st.Approvals = append(st.Approvals, promotionv1alpha1.ApprovalRecord{
			Approval: long("approval-", i, 253), User: long("user-", i, 128), Groups: []string{"platform", "dba"},
			Decision: promotionv1alpha1.Approve, Comment: strings.Repeat("c", 256), Time: now,
		})
	}
	for i := range 32 {
		st.Policies = append(st.Policies, promotionv1alpha1.PolicyResult{Name: long("rule-", i, 63), Fired: true,
			Action: promotionv1alpha1.PolicyRequireApproval, Message: strings.Repeat("p", 256), Required: 2})
	}
	return st
}

// TestFleetStatusFits: a promotion into a stage of change.MaxMembers
// Stacks, every field at its limit, is stored by the real API server
// (whose etcd refuses an object over 1.5 MiB). The size itself is
// BenchmarkFleetStatusSize's figure.
func TestFleetStatusFits(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	ns := newNamespace(t)
	// A stage closed for a day: the promotion waits, Pending, and the
	// status is written as the operator writes it, over its own.
	// Its one Stack's repository does not exist: it never deploys.
	s, _ := gitStack(t, ns, "web", "https://git.example.invalid/none.git", strings.Repeat("a", 40))
	create(t, s)
	create(t, pipeline(ns, "https://git.example.invalid/none.git"))
	create(t, release(ns, "r1", strings.Repeat("c", 40), time.Now()))
	create(t, stage(ns, "fleet", []string{"web"}, func(spec *promotionv1alpha1.StageSpec) {
		spec.PromotionWindows = []promotionv1alpha1.PromotionWindow{{Kind: promotionv1alpha1.Deny,
			DTStart: metav1.NewTime(time.Now().Add(-time.Hour)), DTEnd: metav1.NewTime(time.Now().Add(24 * time.Hour))}}
	}))
	p := askFor(ns, "to-fleet", "fleet", "r1", false)
	create(t, p)
	waitFor(t, p, opTimeout, func(g Gomega, p *promotionv1alpha1.Promotion) {
		g.Expect(p.Status.Message).To(ContainSubstring("waiting for promotion window"))
	})
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		get(g, p)
		p.Status = fleetStatus(change.MaxMembers)
		return env.Client.Status().Update(ctx, p)
	})).To(Succeed(), "a status of %d Stacks at its largest is refused", change.MaxMembers)
	get(g, p)
	g.Expect(p.Status.Stacks).To(HaveLen(change.MaxMembers))
}

// BenchmarkFleetStatusSize reports the size of the largest status of a
// promotion into a stage of change.MaxMembers Stacks (fleetStatus), and
// of a usual one (short names, no messages), in bytes of JSON: the API
// server's storage refuses objects over 1.5 MiB (1,572,864 bytes).
func BenchmarkFleetStatusSize(b *testing.B) {
	worst, err := json.Marshal(fleetStatus(change.MaxMembers))
	if err != nil {
		b.Fatal(err)
	}
	usual := fleetStatus(change.MaxMembers)
	for i := range usual.Stacks {
		ps := &usual.Stacks[i]
		ps.Name, ps.Update, ps.Message = fmt.Sprintf("web-eu-%04d", i), fmt.Sprintf("web-eu-%04d-up-1a2b3c", i), ""
		ps.PreviousCommit, ps.Commit = strings.Repeat("a", 40), strings.Repeat("b", 40)
	}
	usual.Approvals, usual.Policies, usual.Message = usual.Approvals[:2], usual.Policies[:1], "rolling out"
	typical, err := json.Marshal(usual)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := json.Marshal(usual); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(worst)), "bytes-largest")
	b.ReportMetric(float64(len(typical)), "bytes-usual")
}
