package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// Promotions records the change-management metrics: finished promotions,
// the time promotions waited for approvals, and the outcomes of
// verification checks. A nil *Promotions records nothing.
type Promotions struct {
	total        *prometheus.CounterVec
	approvalWait *prometheus.HistogramVec
	checks       *prometheus.CounterVec
	halts        *prometheus.CounterVec
	rollout      *prometheus.HistogramVec
}

// NewPromotions creates the change-management metrics (not yet
// registered; see RegisterCollectors).
func NewPromotions() *Promotions {
	return &Promotions{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackyard_promotions_total",
			Help: "Finished promotions by namespace, stage and result (succeeded, failed, aborted).",
		}, []string{"namespace", "stage", "result"}),
		approvalWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "stackyard_promotion_approval_wait_seconds",
			Help: "Time from a promotion's creation to its start, for stages that require approvals, by namespace and stage.",
			// From seconds (an approver at hand) to a week.
			Buckets: []float64{1, 10, 60, 300, 900, 1800, 3600, 2 * 3600, 4 * 3600, 8 * 3600, 24 * 3600, 3 * 24 * 3600, 7 * 24 * 3600},
		}, []string{"namespace", "stage"}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackyard_verification_checks_total",
			Help: "Finished verification checks by namespace, stage, check and result (passed, failed).",
		}, []string{"namespace", "stage", "check", "result"}),
		halts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackyard_rollout_halts_total",
			Help: "Halts of promotions' rollouts by namespace, stage and cause (budget: the failure budget was spent; verification: a check of a wave failed; person: an Intervention).",
		}, []string{"namespace", "stage", "cause"}),
		rollout: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "stackyard_rollout_duration_seconds",
			Help: "Time from a promotion's start to its end, by namespace, stage and result, for stages that roll out in waves.",
			// From a minute to a few days.
			Buckets: []float64{60, 300, 900, 1800, 3600, 2 * 3600, 4 * 3600, 8 * 3600, 24 * 3600, 3 * 24 * 3600},
		}, []string{"namespace", "stage", "result"}),
	}
}

// ObservePromotion records a promotion that ended with result.
func (p *Promotions) ObservePromotion(namespace, stage, result string) {
	if p != nil {
		p.total.WithLabelValues(namespace, stage, result).Inc()
	}
}

// ObserveApprovalWait records that a promotion into a stage that requires
// approvals started wait after it was created.
func (p *Promotions) ObserveApprovalWait(namespace, stage string, wait time.Duration) {
	if p != nil {
		p.approvalWait.WithLabelValues(namespace, stage).Observe(max(wait, 0).Seconds())
	}
}

// ObserveCheck records a verification check that ended with result.
func (p *Promotions) ObserveCheck(namespace, stage, check, result string) {
	if p != nil {
		p.checks.WithLabelValues(namespace, stage, check, result).Inc()
	}
}

// ObserveHalt records a halt of a rollout, by cause ("budget",
// "verification" or "person").
func (p *Promotions) ObserveHalt(namespace, stage, cause string) {
	if p != nil {
		p.halts.WithLabelValues(namespace, stage, cause).Inc()
	}
}

// ObserveRollout records a rollout in waves that ended with result after
// it ran for d.
func (p *Promotions) ObserveRollout(namespace, stage, result string, d time.Duration) {
	if p != nil {
		p.rollout.WithLabelValues(namespace, stage, result).Observe(max(d, 0).Seconds())
	}
}

// Collectors returns the metrics' collectors, for registration.
func (p *Promotions) Collectors() []prometheus.Collector {
	return []prometheus.Collector{p.total, p.approvalWait, p.checks, p.halts, p.rollout}
}

// rolloutStacksDesc is stackyard_rollout_stacks.
var rolloutStacksDesc = prometheus.NewDesc("stackyard_rollout_stacks",
	"The Stacks of each running promotion that rolls out in waves, by namespace, stage, promotion and state "+
		"(pending, updating, succeeded, failed, skipped).",
	[]string{"namespace", "stage", "promotion", "state"}, nil)

// RolloutCollector reports stackyard_rollout_stacks from a cached reader at
// each scrape: read from the Promotions as they are, a gauge never outlives
// the promotion that ended or was deleted.
type RolloutCollector struct {
	// Reader lists Promotions; the manager's cached client makes a scrape
	// cost no API request.
	Reader client.Reader
	// Timeout bounds one listing.
	Timeout time.Duration
}

// Describe implements prometheus.Collector.
func (c *RolloutCollector) Describe(ch chan<- *prometheus.Desc) { ch <- rolloutStacksDesc }

// Collect implements prometheus.Collector.
func (c *RolloutCollector) Collect(ch chan<- prometheus.Metric) {
	var list promotionv1alpha1.PromotionList
	if err := listWithin(c.Reader, c.Timeout, &list); err != nil {
		ch <- prometheus.NewInvalidMetric(rolloutStacksDesc, err)
		return
	}
	for i := range list.Items {
		p := &list.Items[i]
		ro := p.Status.Rollout
		if p.Status.Phase != promotionv1alpha1.PromotionRunning || ro == nil || ro.Spec == nil {
			continue
		}
		for state, n := range map[string]int32{
			"pending": ro.Counts.Pending, "updating": ro.Counts.Updating, "succeeded": ro.Counts.Succeeded,
			"failed": ro.Counts.Failed, "skipped": ro.Counts.Skipped,
		} {
			ch <- prometheus.MustNewConstMetric(rolloutStacksDesc, prometheus.GaugeValue, float64(n), p.Namespace, p.Spec.Stage, p.Name, state)
		}
	}
}
