package pipeline

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// TestInterval: spec.interval within the floor, and slower once a Receiver
// has woken the Pipeline (not for a person's reconcile request).
func TestInterval(t *testing.T) {
	p := func(interval time.Duration, request string) *promotionv1alpha1.Pipeline {
		out := &promotionv1alpha1.Pipeline{}
		if interval > 0 {
			out.Spec.Interval = &metav1.Duration{Duration: interval}
		}
		if request != "" {
			out.Annotations = map[string]string{shared.ReconcileRequestAnnotation: request}
		}
		return out
	}
	for _, tt := range []struct {
		name string
		p    *promotionv1alpha1.Pipeline
		want time.Duration
	}{
		{"default", p(0, ""), DefaultInterval},
		{"spec.interval", p(5*time.Minute, ""), 5 * time.Minute},
		{"under the floor", p(time.Millisecond, ""), DefaultMinInterval},
		{"a person's request", p(5*time.Minute, "now"), 5 * time.Minute},
		{"woken by a Receiver", p(5*time.Minute, "receiver/forge/1700000000"), 20 * time.Minute},
	} {
		if got := Interval(tt.p, 0); got != tt.want {
			t.Errorf("%s: Interval = %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestPollMaxAge: a Pipeline's poll never takes its own previous listing
// as fresh, even when the jitter brought it back at the earliest the
// schedule allows, yet still takes one from nearly an interval ago.
func TestPollMaxAge(t *testing.T) {
	for _, interval := range []time.Duration{DefaultMinInterval, DefaultInterval, 5 * time.Minute, 20 * time.Minute} {
		res, err := sreconcile.ComputeResult(sreconcile.ResultSuccess, nil,
			sreconcile.Schedule{Interval: interval, Rand: func() float64 { return 0 }})
		if err != nil {
			t.Fatal(err)
		}
		earliest := res.RequeueAfter
		if earliest <= 0 || earliest >= interval {
			t.Fatalf("interval %s: earliest requeue %s; the test expects a jittered one", interval, earliest)
		}
		got := pollMaxAge(interval)
		if got >= earliest {
			t.Errorf("interval %s: max age %s, not under the earliest requeue %s", interval, got, earliest)
		}
		if got < interval*9/10-time.Second {
			t.Errorf("interval %s: max age %s shares too little", interval, got)
		}
	}
}
