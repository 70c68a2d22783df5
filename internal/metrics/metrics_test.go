package metrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

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

// TestStackCollectorCountsItsShard checks that a shard's collector counts
// only the Stacks its selector picks, so that the shards of an
// installation add up to every Stack once. The reader is controller-runtime's
// fake client: what is tested is the listing's options, not an API server.
func TestStackCollectorCountsItsShard(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := pulumiv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue}
	var objs []client.Object
	for i, shard := range []string{"", "blue", "blue", "green"} {
		s := stackWith(false, ready)
		s.Name, s.Namespace = fmt.Sprintf("s%d", i), "apps"
		if shard != "" {
			s.Labels = map[string]string{"stackyard.dev/shard": shard}
		}
		objs = append(objs, &s)
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	for _, tc := range []struct {
		selector string
		want     float64
	}{
		{"", 4},
		{"stackyard.dev/shard=blue", 2},
		{"stackyard.dev/shard notin (blue)", 2},
	} {
		sel, err := labels.Parse(tc.selector)
		if err != nil {
			t.Fatal(err)
		}
		if got := totalOf(t, &StackCollector{Reader: reader, Selector: sel}); got != tc.want {
			t.Errorf("selector %q: %g Stacks counted, want %g", tc.selector, got, tc.want)
		}
	}
}

// totalOf is the state="total" sample that c collects.
func totalOf(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "state" && l.GetValue() == StateTotal {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatal("no total collected")
	return 0
}
