package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
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
