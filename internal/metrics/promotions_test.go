package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

func TestPromotions(t *testing.T) {
	p := NewPromotions()
	reg := prometheus.NewRegistry()
	reg.MustRegister(p.Collectors()...)
	p.ObservePromotion("team", "qa", "failed")
	p.ObservePromotion("team", "qa", "succeeded")
	p.ObservePromotion("team", "qa", "succeeded")
	p.ObserveCheck("team", "qa", "health", "failed")
	p.ObserveApprovalWait("team", "prod", 90*time.Second)
	p.ObserveApprovalWait("team", "prod", -time.Second)
	want := `
# HELP stackyard_promotions_total Finished promotions by namespace, stage and result (succeeded, failed, aborted).
# TYPE stackyard_promotions_total counter
stackyard_promotions_total{namespace="team",result="failed",stage="qa"} 1
stackyard_promotions_total{namespace="team",result="succeeded",stage="qa"} 2
# HELP stackyard_verification_checks_total Finished verification checks by namespace, stage, check and result (passed, failed).
# TYPE stackyard_verification_checks_total counter
stackyard_verification_checks_total{check="health",namespace="team",result="failed",stage="qa"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "stackyard_promotions_total", "stackyard_verification_checks_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(p.approvalWait); n != 1 {
		t.Errorf("approval wait: %d series, want 1", n)
	}
	if got := testutil.ToFloat64(p.total.WithLabelValues("team", "qa", "succeeded")); got != 2 {
		t.Errorf("succeeded = %v, want 2", got)
	}
	// A nil *Promotions records nothing and does not panic.
	var none *Promotions
	none.ObservePromotion("team", "qa", "failed")
	none.ObserveCheck("team", "qa", "health", "passed")
	none.ObserveApprovalWait("team", "qa", time.Second)
}

// TestRolloutCollector: only running promotions that roll out in waves
// are counted, each by state, from the Promotions as the reader holds
// them. The reader is controller-runtime's fake client: what is tested is
// which promotions count, not an API server.
func TestRolloutCollector(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := promotionv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	promotion := func(name string, phase promotionv1alpha1.PromotionPhase, ro *promotionv1alpha1.RolloutStatus) *promotionv1alpha1.Promotion {
		p := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name}, Spec: promotionv1alpha1.PromotionSpec{Stage: "edge"}}
		p.Status.Phase, p.Status.Rollout = phase, ro
		return p
	}
	waves := &promotionv1alpha1.RolloutStatus{Spec: &promotionv1alpha1.Rollout{}, Waves: 3, Counts: promotionv1alpha1.RolloutCounts{Pending: 5, Updating: 2, Succeeded: 3, Failed: 1}}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		promotion("running", promotionv1alpha1.PromotionRunning, waves),
		promotion("ended", promotionv1alpha1.PromotionSucceeded, waves),
		// Halted by a person on a stage without a rollout: no waves to count.
		promotion("no-rollout", promotionv1alpha1.PromotionRunning, &promotionv1alpha1.RolloutStatus{Waves: 1}),
	).Build()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(&RolloutCollector{Reader: reader})
	want := `
# HELP stackyard_rollout_stacks The Stacks of each running promotion that rolls out in waves, by namespace, stage, promotion and state (pending, updating, succeeded, failed, skipped).
# TYPE stackyard_rollout_stacks gauge
stackyard_rollout_stacks{namespace="team",promotion="running",stage="edge",state="failed"} 1
stackyard_rollout_stacks{namespace="team",promotion="running",stage="edge",state="pending"} 5
stackyard_rollout_stacks{namespace="team",promotion="running",stage="edge",state="skipped"} 0
stackyard_rollout_stacks{namespace="team",promotion="running",stage="edge",state="succeeded"} 3
stackyard_rollout_stacks{namespace="team",promotion="running",stage="edge",state="updating"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "stackyard_rollout_stacks"); err != nil {
		t.Error(err)
	}
}
