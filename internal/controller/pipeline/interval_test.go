package pipeline

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
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
