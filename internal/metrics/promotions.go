package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
