package promotion

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// A running promotion follows its Stacks through this index; once it has
// finished, a change of those Stacks must not wake it.
func TestUnfinishedStacks(t *testing.T) {
	running := &promotionv1alpha1.Promotion{}
	running.Status.Phase = promotionv1alpha1.PromotionRunning
	running.Status.Stacks = []promotionv1alpha1.PromotedStack{{Name: "web-prod"}, {Name: "db-prod"}}
	if got := unfinishedStacks(running); !slices.Equal(got, []string{"web-prod", "db-prod"}) {
		t.Errorf("running: got %q", got)
	}
	pending := &promotionv1alpha1.Promotion{}
	if got := unfinishedStacks(pending); len(got) != 0 {
		t.Errorf("pending, no stacks recorded yet: got %q", got)
	}
	for _, phase := range []promotionv1alpha1.PromotionPhase{promotionv1alpha1.PromotionSucceeded, promotionv1alpha1.PromotionFailed, promotionv1alpha1.PromotionAborted} {
		done := running.DeepCopy()
		done.Status.Phase = phase
		if got := unfinishedStacks(done); got != nil {
			t.Errorf("%s: got %q, want nothing", phase, got)
		}
	}
	if got := unfinishedStacks(&corev1.ConfigMap{}); got != nil {
		t.Errorf("another kind: got %q", got)
	}
}
