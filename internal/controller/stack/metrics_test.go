package stack_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/metrics"
)

// TestMetricsEndpoint scrapes the operator's metrics endpoint, as
// Prometheus would, before and after a Stack is deployed. Earlier tests
// leave Stacks and counts behind, so what this Stack adds is measured as
// a difference: its successful up is counted and timed, and its reconciles
// went through the Stack controller's work queue, whose depth is exported.
// The Stacks-by-state gauge is compared with the Stacks the API server
// holds.
func TestMetricsEndpoint(t *testing.T) {
	g := NewWithT(t)
	succeededUp := map[string]string{"type": "up", "result": "succeeded"}
	stackQueue := map[string]string{"name": "stack"}
	before := scrape(g)

	s, _ := programStack(t, "measured", nil)
	waitStack(t, s.Namespace, s.Name, opTimeout, ready)
	g.Eventually(func(g Gomega) {
		var stacks pulumiv1.StackList
		g.Expect(env.Client.List(context.Background(), &stacks)).To(Succeed())
		want := metrics.CountStacks(stacks.Items)
		families := scrape(g)
		for _, state := range []string{metrics.StateTotal, metrics.StateReady, metrics.StateStalled} {
			g.Expect(value(g, families, "stackyard_stacks", map[string]string{"state": state})).To(BeEquivalentTo(want[state]), "state %s", state)
		}
		g.Expect(want[metrics.StateReady]).To(BeNumerically(">=", 1), "this test's Stack is Ready")
		for _, name := range []string{"stackyard_updates_total", "stackyard_update_duration_seconds"} {
			g.Expect(value(g, families, name, succeededUp)).To(BeNumerically(">=", valueOrZero(before, name, succeededUp)+1), name)
		}
		g.Expect(value(g, families, "workqueue_adds_total", stackQueue)).To(BeNumerically(">", valueOrZero(before, "workqueue_adds_total", stackQueue)))
		g.Expect(sample(families, "workqueue_depth", stackQueue)).NotTo(BeNil(), "the Stack controller's queue depth is not exported")
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
// labels: a gauge's or counter's value, a histogram's sample count. It
// fails when there is no such sample.
func value(g Gomega, families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	m := sample(families, name, labels)
	g.Expect(m).NotTo(BeNil(), "no sample of %s with labels %v", name, labels)
	return sampleValue(m)
}

// valueOrZero is value, or zero when there is no such sample yet (a
// counter appears on its first increment).
func valueOrZero(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	if m := sample(families, name, labels); m != nil {
		return sampleValue(m)
	}
	return 0
}

// sample returns the sample of name whose labels include labels, or nil.
func sample(families map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	for _, m := range families[name].GetMetric() {
		if hasLabels(m, labels) {
			return m
		}
	}
	return nil
}

// sampleValue is a gauge's or counter's value, a histogram's sample count.
func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
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
