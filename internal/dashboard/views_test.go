package dashboard

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
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

func TestWaveBar(t *testing.T) {
	for _, tt := range []struct {
		name   string
		counts promotionv1alpha1.RolloutCounts
		want   []barSegment
	}{
		{"no Stacks", promotionv1alpha1.RolloutCounts{}, nil},
		{"all pending", promotionv1alpha1.RolloutCounts{Pending: 3}, []barSegment{{"pending", 0, 100}}},
		{"in order, empty states left out", promotionv1alpha1.RolloutCounts{Pending: 1, Succeeded: 2, Failed: 1},
			[]barSegment{{"succeeded", 0, 50}, {"failed", 50, 25}, {"pending", 75, 25}}},
		{"every state", promotionv1alpha1.RolloutCounts{Succeeded: 1, Failed: 1, Updating: 1, Skipped: 1, Pending: 1},
			[]barSegment{{"succeeded", 0, 20}, {"failed", 20, 20}, {"updating", 40, 20}, {"skipped", 60, 20}, {"pending", 80, 20}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := waveBar(tt.counts); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("waveBar(%+v) = %+v, want %+v", tt.counts, got, tt.want)
			}
		})
	}
}

// TestPromotionSummaryOfAWaitingWave: while a wave of a rollout waits for
// approvals, lists count that wave's approvals under the policy the
// promotion recorded, not the promotion's own (already met) nor its fired
// rules.
func TestPromotionSummaryOfAWaitingWave(t *testing.T) {
	p := &promotionv1alpha1.Promotion{}
	p.Status.Phase, p.Status.Reason = promotionv1alpha1.PromotionRunning, promotionv1alpha1.PromotionReasonAwaitingApproval
	p.Status.Approvals = []promotionv1alpha1.ApprovalRecord{{User: "a", Decision: promotionv1alpha1.Approve}, {User: "b", Decision: promotionv1alpha1.Approve}}
	p.Status.Policies = []promotionv1alpha1.PolicyResult{{Name: "db", Action: promotionv1alpha1.PolicyRequireApproval, Required: 3}}
	p.Status.Rollout = &promotionv1alpha1.RolloutStatus{
		Spec: &promotionv1alpha1.Rollout{ApproveEachWave: true}, Waves: 3, Wave: 1,
		ApprovalPolicy: &promotionv1alpha1.ApprovalPolicy{Required: 2},
		Approval:       &promotionv1alpha1.WaveApproval{Wave: 2, Approvals: []promotionv1alpha1.ApprovalRecord{{User: "c", Decision: promotionv1alpha1.Approve}}},
	}
	st := &promotionv1alpha1.Stage{}
	st.Spec.Approval = &promotionv1alpha1.ApprovalPolicy{Required: 5}
	pv := promotionSummary(p, st)
	if !pv.AwaitsApproval || pv.Wave != 2 || pv.Approvals != 1 || pv.Required != 2 || len(pv.Rules) != 0 {
		t.Errorf("summary %+v: want wave 2 awaiting, 1 of 2, no rules", pv)
	}
}
