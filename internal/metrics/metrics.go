// Package metrics exports stackyard's Prometheus metrics through
// controller-runtime's registry (served on the manager's metrics endpoint):
//
//   - stackyard_stacks{state}: Stacks by state (ready, reconciling, stalled,
//     failing), counted from the informer cache at scrape time, so the gauge
//     is always the level and never drifts from the objects;
//   - stackyard_updates_total{type,result} and
//     stackyard_update_duration_seconds{type,result}: finished operations;
//   - stackyard_promotions_total{namespace,stage,result},
//     stackyard_promotion_approval_wait_seconds{namespace,stage} and
//     stackyard_verification_checks_total{namespace,stage,check,result}:
//     change management (promotions.go);
//   - stackyard_notifications_total{namespace,alert,result}: the Alerts'
//     delivery attempts (notifications.go);
//   - the work queue depth, latency and retries of every controller, which
//     controller-runtime exports itself (workqueue_depth{name=...}).
package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// Stack states reported by stackyard_stacks. A Stack is counted once per
// state it is in; "failing" (last update failed) overlaps the others.
const (
	StateReady       = "ready"
	StateReconciling = "reconciling"
	StateStalled     = "stalled"
	StateFailing     = "failing"
	StateTotal       = "total"
)

var stacksDesc = prometheus.NewDesc("stackyard_stacks",
	"Number of Stacks by state (ready, reconciling, stalled, failing, total).", []string{"state"}, nil)

// CountStacks tallies Stacks by state.
func CountStacks(stacks []pulumiv1.Stack) map[string]int {
	counts := map[string]int{StateReady: 0, StateReconciling: 0, StateStalled: 0, StateFailing: 0, StateTotal: len(stacks)}
	for i := range stacks {
		st := &stacks[i].Status
		switch {
		case sreconcile.IsStalled(st.Conditions):
			counts[StateStalled]++
		case sreconcile.IsReconciling(st.Conditions):
			counts[StateReconciling]++
		case sreconcile.IsReady(st.Conditions):
			counts[StateReady]++
		}
		if st.LastUpdate != nil && st.LastUpdate.State == shared.FailedStackStateMessage {
			counts[StateFailing]++
		}
	}
	return counts
}

// StackCollector reports stackyard_stacks from a cached reader.
type StackCollector struct {
	// Reader lists Stacks; the manager's cached client makes a scrape cost
	// no API request.
	Reader client.Reader
	// Selector picks the Stacks counted: this shard's (internal/shard), so
	// that the shards of an installation add up to every Stack once; nil
	// counts all.
	Selector labels.Selector
	// Timeout bounds one listing.
	Timeout time.Duration
}

// Describe implements prometheus.Collector.
func (c *StackCollector) Describe(ch chan<- *prometheus.Desc) { ch <- stacksDesc }

// Collect implements prometheus.Collector.
func (c *StackCollector) Collect(ch chan<- prometheus.Metric) {
	var list pulumiv1.StackList
	var opts []client.ListOption
	if c.Selector != nil && !c.Selector.Empty() {
		opts = append(opts, client.MatchingLabelsSelector{Selector: c.Selector})
	}
	if err := listWithin(c.Reader, c.Timeout, &list, opts...); err != nil {
		ch <- prometheus.NewInvalidMetric(stacksDesc, err)
		return
	}
	for state, n := range CountStacks(list.Items) {
		ch <- prometheus.MustNewConstMetric(stacksDesc, prometheus.GaugeValue, float64(n), state)
	}
}

// listWithin lists into list from reader, within timeout (5 s when
// zero): what a collector reads at each scrape.
func listWithin(reader client.Reader, timeout time.Duration, list client.ObjectList, opts ...client.ListOption) error {
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return reader.List(ctx, list, opts...)
}

// Updates records finished operations.
type Updates struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	refused  *prometheus.CounterVec
}

// NewUpdates creates the update metrics (not yet registered).
func NewUpdates() *Updates {
	return &Updates{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackyard_updates_total",
			Help: "Finished Pulumi operations by type (preview, up, refresh, destroy) and result (succeeded, failed, conflict, interrupted, cancelled).",
		}, []string{"type", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "stackyard_update_duration_seconds",
			Help:    "Duration of finished Pulumi operations by type and result.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 3600},
		}, []string{"type", "result"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackyard_operations_refused_total",
			Help: "Operations the choke point refused before they ran, by type (preview, up, refresh, destroy) and reason " +
				"(ForeignUpdate, MakerGone, Unrecorded, NotPreview, NoConsent, UnapprovedPin, Unapproved).",
		}, []string{"type", "reason"}),
	}
}

// ObserveUpdate records one finished operation.
func (u *Updates) ObserveUpdate(typ, result string, d time.Duration) {
	u.total.WithLabelValues(typ, result).Inc()
	u.duration.WithLabelValues(typ, result).Observe(d.Seconds())
}

// ObserveRefusal records one operation the choke point refused.
func (u *Updates) ObserveRefusal(typ, reason string) {
	u.refused.WithLabelValues(typ, reason).Inc()
}

// Collectors returns the update metrics' collectors, for registration.
func (u *Updates) Collectors() []prometheus.Collector {
	return []prometheus.Collector{u.total, u.duration, u.refused}
}

// Register adds the stack collector and the update metrics to
// controller-runtime's registry. Collectors left there by an operator
// assembled earlier in the same process (tests stop the operator and start
// a new one) are replaced, so that the metrics come from the manager that
// runs and not from a stopped one.
func Register(reader client.Reader, stacks labels.Selector, updates *Updates) error {
	return RegisterCollectors(append(updates.Collectors(), &StackCollector{Reader: reader, Selector: stacks})...)
}

// RegisterCollectors adds collectors to controller-runtime's registry,
// replacing those of the same metrics left there by an operator assembled
// earlier in the same process.
func RegisterCollectors(collectors ...prometheus.Collector) error {
	for _, c := range collectors {
		err := ctrlmetrics.Registry.Register(c)
		var dup prometheus.AlreadyRegisteredError
		if errors.As(err, &dup) {
			ctrlmetrics.Registry.Unregister(dup.ExistingCollector)
			err = ctrlmetrics.Registry.Register(c)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
