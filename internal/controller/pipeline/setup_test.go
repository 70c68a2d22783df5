package pipeline

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// Retention keeps the Releases this index returns: a finished promotion
// left in it would keep its Release forever, and an unfinished one missing
// from it would let retention delete the Release it is deploying.
func TestUnfinishedRelease(t *testing.T) {
	phases := []struct {
		phase promotionv1alpha1.PromotionPhase
		kept  bool
	}{
		{"", true},
		{promotionv1alpha1.PromotionPending, true},
		{promotionv1alpha1.PromotionRunning, true},
		{promotionv1alpha1.PromotionSucceeded, false},
		{promotionv1alpha1.PromotionFailed, false},
		{promotionv1alpha1.PromotionAborted, false},
	}
	for _, tt := range phases {
		t.Run(string(tt.phase), func(t *testing.T) {
			p := &promotionv1alpha1.Promotion{Spec: promotionv1alpha1.PromotionSpec{Stage: "prod", Release: "web-abc"}}
			p.Status.Phase = tt.phase
			got := unfinishedRelease(p)
			if tt.kept && !slices.Equal(got, []string{"web-abc"}) {
				t.Errorf("got %q, want the release", got)
			}
			if !tt.kept && got != nil {
				t.Errorf("got %q, want nothing", got)
			}
		})
	}
	if got := unfinishedRelease(&corev1.ConfigMap{}); got != nil {
		t.Errorf("another kind: got %q", got)
	}
}
