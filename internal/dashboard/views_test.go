package dashboard

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
)

// TestUpdateState: an Update waiting for its workspace is Pending, whether
// it says so (Progressing=True, reason Pending) or says nothing yet, as an
// Update of a Stack does until it starts.
func TestUpdateState(t *testing.T) {
	cond := func(typ, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason}
	}
	for name, tc := range map[string]struct {
		conds []metav1.Condition
		want  string
	}{
		"no status": {nil, "Pending"},
		"waiting":   {[]metav1.Condition{cond(autov1alpha1.UpdateConditionTypeProgressing, autov1alpha1.UpdateReasonPending)}, "Pending"},
		"running":   {[]metav1.Condition{cond(autov1alpha1.UpdateConditionTypeProgressing, autov1alpha1.UpdateReasonInProgress)}, "Running"},
		"succeeded": {[]metav1.Condition{cond(autov1alpha1.UpdateConditionTypeComplete, "Updated")}, "Succeeded"},
		"failed":    {[]metav1.Condition{cond(autov1alpha1.UpdateConditionTypeComplete, "Updated"), cond(autov1alpha1.UpdateConditionTypeFailed, "UpdateFailed")}, "Failed"},
	} {
		t.Run(name, func(t *testing.T) {
			u := &autov1alpha1.Update{Status: autov1alpha1.UpdateStatus{Conditions: tc.conds}}
			if got := buildUpdate(u).State; got != tc.want {
				t.Errorf("state = %s, want %s", got, tc.want)
			}
		})
	}
}
