package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

func stackWith(failed bool, conds ...metav1.Condition) pulumiv1.Stack {
	s := pulumiv1.Stack{Status: pulumiv1.StackStatus{Conditions: conds}}
	if failed {
		s.Status.LastUpdate = &shared.StackUpdateState{State: shared.FailedStackStateMessage}
	}
	return s
}

func TestCountStacks(t *testing.T) {
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue}
	reconciling := metav1.Condition{Type: "Reconciling", Status: metav1.ConditionTrue}
	stalled := metav1.Condition{Type: "Stalled", Status: metav1.ConditionTrue}
	got := CountStacks([]pulumiv1.Stack{
		stackWith(false, ready),
		stackWith(false, ready),
		stackWith(true, reconciling),
		stackWith(true, stalled),
		stackWith(false),
	})
	want := map[string]int{StateReady: 2, StateReconciling: 1, StateStalled: 1, StateFailing: 2, StateTotal: 5}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
}

func TestObserveUpdate(t *testing.T) {
	u := NewUpdates()
	reg := prometheus.NewRegistry()
	for _, c := range u.Collectors() {
		reg.MustRegister(c)
	}
	u.ObserveUpdate("up", "succeeded", 3*time.Second)
	u.ObserveUpdate("up", "failed", time.Second)
	u.ObserveUpdate("up", "succeeded", 7*time.Second)
	want := `
# HELP stackyard_updates_total Finished Pulumi operations by type (preview, up, refresh, destroy) and result (succeeded, failed, conflict, interrupted, cancelled).
# TYPE stackyard_updates_total counter
stackyard_updates_total{result="failed",type="up"} 1
stackyard_updates_total{result="succeeded",type="up"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "stackyard_updates_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(u.duration); n != 2 {
		t.Errorf("duration series: got %d, want 2", n)
	}
}
