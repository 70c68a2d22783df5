package stack_test

import (
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMetricsEndpoint scrapes the operator's metrics endpoint, as
// Prometheus would, after a Stack was deployed: Stacks by state, finished
// operations by type and result with their durations, and the Stack
// controller's work queue.
func TestMetricsEndpoint(t *testing.T) {
	g := NewWithT(t)
	s, _ := programStack(t, "measured", nil)
	waitStack(t, s.Namespace, s.Name, opTimeout, ready)
	g.Eventually(func(g Gomega) {
		families := scrape(g)
		g.Expect(value(g, families, "stackyard_stacks", map[string]string{"state": "ready"})).To(BeNumerically(">=", 1))
		g.Expect(value(g, families, "stackyard_stacks", map[string]string{"state": "total"})).To(BeNumerically(">=", 1))
		g.Expect(value(g, families, "stackyard_updates_total", map[string]string{"type": "up", "result": "succeeded"})).To(BeNumerically(">=", 1))
		g.Expect(value(g, families, "stackyard_update_duration_seconds", map[string]string{"type": "up", "result": "succeeded"})).To(BeNumerically(">=", 1))
		g.Expect(value(g, families, "workqueue_depth", map[string]string{"name": "stack"})).To(BeNumerically(">=", 0))
	}, opTimeout, time.Second).Should(Succeed())
}

// scrape reads the metrics endpoint in Prometheus' text format.
func scrape(g Gomega) map[string]*dto.MetricFamily {
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return families
}

// value returns the value of the sample of name whose labels include
// labels: a gauge's or counter's value, a histogram's sample count.
func value(g Gomega, families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f := families[name]
	g.Expect(f).NotTo(BeNil(), "no metric %s", name)
	for _, m := range f.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	g.Expect(false).To(BeTrue(), "no sample of %s with labels %v", name, labels)
	return 0
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	found := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			found++
		}
	}
	return found == len(want)
}
