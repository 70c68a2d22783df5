package reconcile

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEscalate(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	bound := 5 * time.Minute
	at := func(c metav1.Condition, ago time.Duration) metav1.Condition {
		c.LastTransitionTime = metav1.NewTime(now.Add(-ago))
		return c
	}
	failing := func(reason string, gen int64) metav1.Condition {
		return cond(ReconcilingCondition, metav1.ConditionTrue, gen, reason, "failing")
	}
	applyFailed := NewGeneric("WorkspaceApplyFailed", errCause)
	missing := NewMissing("SecretNotFound", errCause)
	tests := []struct {
		name        string
		conds       []metav1.Condition
		err         error
		wantStall   bool
		wantRequeue time.Duration
	}{
		{name: "nil error", err: nil},
		{name: "first failure", err: applyFailed},
		{name: "same failure, younger than the bound", conds: []metav1.Condition{at(failing("WorkspaceApplyFailed", 1), 4*time.Minute)}, err: applyFailed},
		{name: "same failure, older than the bound", conds: []metav1.Condition{at(failing("WorkspaceApplyFailed", 1), 6*time.Minute)}, err: applyFailed, wantStall: true, wantRequeue: bound},
		{name: "untyped failure lasting", conds: []metav1.Condition{at(failing(ReconcilingRetryReason, 1), time.Hour)}, err: errCause, wantStall: true, wantRequeue: bound},
		{name: "another failure", conds: []metav1.Condition{at(failing("UpdateCreateFailed", 1), time.Hour)}, err: applyFailed},
		{name: "same failure, older generation", conds: []metav1.Condition{at(failing("WorkspaceApplyFailed", 0), time.Hour)}, err: applyFailed},
		{name: "already stalled on it", conds: []metav1.Condition{cond(StalledCondition, metav1.ConditionTrue, 1, "WorkspaceApplyFailed", "x")}, err: applyFailed, wantStall: true, wantRequeue: bound},
		{name: "stalled on something else", conds: []metav1.Condition{cond(StalledCondition, metav1.ConditionTrue, 1, "SpecInvalid", "x")}, err: applyFailed},
		{name: "bounded wait lasting", conds: []metav1.Condition{at(failing("SecretNotFound", 1), time.Hour)}, err: missing, wantStall: true, wantRequeue: DefaultWaitInterval},
		{name: "unbounded wait lasting", conds: []metav1.Condition{at(failing("PrerequisiteNotSatisfied", 1), time.Hour)}, err: NewWaiting("PrerequisiteNotSatisfied", errCause, 0)},
		{name: "a stall stays itself", conds: []metav1.Condition{at(failing("SpecInvalid", 1), time.Hour)}, err: NewStalling("SpecInvalid", errCause), wantStall: true},
		{name: "wrapped generic lasting", conds: []metav1.Condition{at(failing("WorkspaceApplyFailed", 1), time.Hour)}, err: fmt.Errorf("step: %w", applyFailed), wantStall: true, wantRequeue: bound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Escalate(tt.conds, 1, tt.err, now, bound)
			var stall *Stalling
			if isStall := errors.As(got, &stall); isStall != tt.wantStall {
				t.Fatalf("Escalate = %v, want a stall: %v", got, tt.wantStall)
			}
			if !tt.wantStall {
				if got != tt.err {
					t.Errorf("Escalate changed a failure that has not lasted: %v", got)
				}
				return
			}
			if stall.Reason != Reason(tt.err) {
				t.Errorf("reason = %q, want %q", stall.Reason, Reason(tt.err))
			}
			if stall.RequeueAfter != tt.wantRequeue {
				t.Errorf("requeue = %s, want %s", stall.RequeueAfter, tt.wantRequeue)
			}
			if !strings.Contains(got.Error(), errCause.Error()) || !errors.Is(got, errCause) {
				t.Errorf("the stall lost the failure: %v", got)
			}
		})
	}
}

// TestEscalateAfterMarkReconciling follows a failure through the
// conditions: its clock starts when the reason changes, not when
// Reconciling first became True.
func TestEscalateAfterMarkReconciling(t *testing.T) {
	var conds []metav1.Condition
	MarkReconciling(&conds, 1, ReconcilingProcessingReason, "updating")
	old := metav1.NewTime(time.Now().Add(-time.Hour))
	conds[1].LastTransitionTime = old // Reconciling since an hour ago
	err := NewGeneric("UpdateCreateFailed", errCause)
	MarkReconciling(&conds, 1, Reason(err), err.Error())
	if got := Escalate(conds, 1, err, time.Now(), time.Minute); got != err {
		t.Fatalf("a failure that just began escalated: %v", got)
	}
	if got := Escalate(conds, 1, err, time.Now().Add(2*time.Minute), time.Minute); !errors.As(got, new(*Stalling)) {
		t.Fatalf("a failure older than the bound did not escalate: %v", got)
	}
}

// TestIsLastingFailure tells an escalated stall from one a step returned,
// also when the message was cut to the API's limit.
func TestIsLastingFailure(t *testing.T) {
	now := time.Now()
	lasting := Escalate([]metav1.Condition{cond(StalledCondition, metav1.ConditionTrue, 1, "UpdateCreateFailed", "x")},
		1, NewGeneric("UpdateCreateFailed", errors.New(strings.Repeat("long ", 10000))), now, time.Minute)
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{name: "escalated", err: lasting, want: true},
		{name: "returned by a step", err: NewStalling("SpecInvalid", errCause)},
		{name: "not stalled", err: NewGeneric("UpdateCreateFailed", errCause)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var conds []metav1.Condition
			Summarize(&conds, 1, ResultEmpty, tt.err)
			if got := IsLastingFailure(conds); got != tt.want {
				t.Errorf("IsLastingFailure(%v) = %v, want %v", conds, got, tt.want)
			}
		})
	}
}
