package update

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
)

// TestPlans saves a preview's plan in a Secret owned by the preview Update
// and holds ups to it: an up with the previewed inputs follows it; an up
// after an input changed is refused with PlanViolation; an up naming a
// plan Secret that does not exist fails without running.
func TestPlans(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startManager(Options{MaxConcurrentReconciles: 1})
	a := f.workspace("ws", nil)

	savePlan := func(u *autov1alpha1.Update) { u.Spec.SavePlan = ptr.To(true) }
	heldTo := func(secret string) func(*autov1alpha1.Update) {
		return func(u *autov1alpha1.Update) { u.Spec.PlanSecret = secret }
	}
	succeeded := func(name string) *autov1alpha1.Update {
		t.Helper()
		u := f.waitComplete(name, opTimeout)
		if u.Status.IsFailed() {
			t.Fatalf("%s failed: %s", name, u.Status.Message)
		}
		return u
	}

	f.createUpdate("preview", "ws", autov1alpha1.PreviewType, savePlan)
	preview := succeeded("preview")
	if preview.Status.Plan != PlanSecretName("preview") {
		t.Fatalf("status.plan = %q, want %q", preview.Status.Plan, PlanSecretName("preview"))
	}
	s := f.secret(preview.Status.Plan)
	if !metav1.IsControlledBy(s, preview) || !ptr.Deref(s.Immutable, false) || len(s.Data[autov1alpha1.PlanKey]) == 0 {
		t.Errorf("plan Secret: owned %v, immutable %v, %d bytes of plan", metav1.IsControlledBy(s, preview), s.Immutable, len(s.Data[autov1alpha1.PlanKey]))
	}
	f.createUpdate("up", "ws", autov1alpha1.UpType, heldTo(preview.Status.Plan))
	if up := succeeded("up"); up.Status.Plan != "" {
		t.Errorf("an up records status.plan %q", up.Status.Plan)
	}

	// An input changes between the preview and the up.
	f.setConfig(a, map[string]any{"sleep": 1})
	f.createUpdate("preview2", "ws", autov1alpha1.PreviewType, savePlan)
	plan := succeeded("preview2").Status.Plan
	f.setConfig(a, map[string]any{"sleep": 2})
	f.createUpdate("up2", "ws", autov1alpha1.UpType, heldTo(plan))
	up2 := f.waitComplete("up2", opTimeout)
	if !up2.Status.IsFailed() || failedReason(up2) != autov1alpha1.UpdateReasonFailed ||
		!strings.HasPrefix(up2.Status.Message, "PlanViolation: ") || !strings.Contains(up2.Status.Message, "violates plan") {
		t.Errorf("up2: failed %v, reason %s, message %q; want UpdateFailed with PlanViolation", up2.Status.IsFailed(), failedReason(up2), up2.Status.Message)
	}

	f.createUpdate("up3", "ws", autov1alpha1.UpType, heldTo("no-such-plan"))
	up3 := f.waitComplete("up3", opTimeout)
	if want := `spec.planSecret: Secret "no-such-plan" not found; the update was not run`; !up3.Status.IsFailed() || up3.Status.Message != want {
		t.Errorf("up3: failed %v, message %q; want %q", up3.Status.IsFailed(), up3.Status.Message, want)
	}
}
