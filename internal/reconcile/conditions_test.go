package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// cond builds an expected condition; LastTransitionTime is compared apart.
func cond(typ string, status metav1.ConditionStatus, gen int64, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, ObservedGeneration: gen, Reason: reason, Message: msg}
}

// ignoreTime leaves LastTransitionTime out of comparisons and sorts by type.
var ignoreTime = cmp.Options{
	cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime"),
	cmpopts.SortSlices(func(a, b metav1.Condition) bool { return a.Type < b.Type }),
}

var (
	readyTrue     = cond(ReadyCondition, metav1.ConditionTrue, 1, ReadyCompletedReason, DefaultReadyMessage)
	reconcilingOn = cond(ReconcilingCondition, metav1.ConditionTrue, 1, ReconcilingProcessingReason, "working")
	stalledOn     = cond(StalledCondition, metav1.ConditionTrue, 1, StalledSpecInvalidReason, "bad spec")
)

func TestMark(t *testing.T) {
	tests := []struct {
		name  string
		start []metav1.Condition
		mark  func(*[]metav1.Condition)
		want  []metav1.Condition
	}{
		{
			name: "reconciling from nothing",
			mark: func(c *[]metav1.Condition) { MarkReconciling(c, 2, "StackProcessing", "the stack is being processed") },
			want: []metav1.Condition{
				cond(ReadyCondition, metav1.ConditionFalse, 2, "NotReadyInProgress", "reconciliation is in progress"),
				cond(ReconcilingCondition, metav1.ConditionTrue, 2, "StackProcessing", "the stack is being processed"),
			},
		},
		{
			name:  "reconciling removes stalled",
			start: []metav1.Condition{readyTrue, stalledOn},
			mark:  func(c *[]metav1.Condition) { MarkReconciling(c, 2, "RetryingAfterFailure", "3 update failure(s)") },
			want: []metav1.Condition{
				cond(ReadyCondition, metav1.ConditionFalse, 2, "NotReadyInProgress", "reconciliation is in progress"),
				cond(ReconcilingCondition, metav1.ConditionTrue, 2, "RetryingAfterFailure", "3 update failure(s)"),
			},
		},
		{
			name:  "reconciling with empty reason gets the default",
			start: nil,
			mark:  func(c *[]metav1.Condition) { MarkReconciling(c, 1, "", "") },
			want: []metav1.Condition{
				cond(ReadyCondition, metav1.ConditionFalse, 1, "NotReadyInProgress", "reconciliation is in progress"),
				cond(ReconcilingCondition, metav1.ConditionTrue, 1, "StackProcessing", ""),
			},
		},
		{
			name:  "stalled removes reconciling",
			start: []metav1.Condition{reconcilingOn},
			mark:  func(c *[]metav1.Condition) { MarkStalled(c, 3, "SourceUnavailable", "repository not found") },
			want: []metav1.Condition{
				cond(ReadyCondition, metav1.ConditionFalse, 3, "NotReadyStalled", "reconciliation is stalled"),
				cond(StalledCondition, metav1.ConditionTrue, 3, "SourceUnavailable", "repository not found"),
			},
		},
		{
			name:  "ready removes both",
			start: []metav1.Condition{reconcilingOn, stalledOn},
			mark:  func(c *[]metav1.Condition) { MarkReady(c, 4, "") },
			want:  []metav1.Condition{cond(ReadyCondition, metav1.ConditionTrue, 4, "ProcessingCompleted", "the stack has been processed and is up to date")},
		},
		{
			name:  "ready with its own message keeps other conditions",
			start: []metav1.Condition{cond("DriftDetected", metav1.ConditionFalse, 1, "NoDrift", "")},
			mark:  func(c *[]metav1.Condition) { MarkReady(c, 1, "the program has been packaged") },
			want: []metav1.Condition{
				cond("DriftDetected", metav1.ConditionFalse, 1, "NoDrift", ""),
				cond(ReadyCondition, metav1.ConditionTrue, 1, "ProcessingCompleted", "the program has been packaged"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conds := append([]metav1.Condition(nil), tt.start...)
			tt.mark(&conds)
			if diff := cmp.Diff(tt.want, conds, ignoreTime); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			for _, c := range conds {
				if c.Type != "DriftDetected" && c.LastTransitionTime.IsZero() {
					t.Errorf("%s has no LastTransitionTime", c.Type)
				}
			}
		})
	}
}

func TestMarkKeepsTransitionTimeWhileStatusHolds(t *testing.T) {
	past := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	tests := []struct {
		name        string
		mark        func(*[]metav1.Condition)
		wantChanged bool
	}{
		{name: "same status, new reason and message", mark: func(c *[]metav1.Condition) { MarkReconciling(c, 2, "RetryingAfterFailure", "again") }, wantChanged: false},
		{name: "status flips", mark: func(c *[]metav1.Condition) { MarkReady(c, 2, "") }, wantChanged: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ready := cond(ReadyCondition, metav1.ConditionFalse, 1, NotReadyInProgressReason, InProgressMessage)
			ready.LastTransitionTime = past
			conds := []metav1.Condition{ready}
			tt.mark(&conds)
			got := conds[0]
			if changed := !got.LastTransitionTime.Equal(&past); changed != tt.wantChanged {
				t.Errorf("LastTransitionTime changed = %v, want %v", changed, tt.wantChanged)
			}
			if got.ObservedGeneration != 2 {
				t.Errorf("ObservedGeneration = %d, want 2", got.ObservedGeneration)
			}
		})
	}
}

func TestConditionPredicates(t *testing.T) {
	tests := []struct {
		name                          string
		conds                         []metav1.Condition
		ready, reconciling, isStalled bool
	}{
		{name: "none"},
		{name: "ready", conds: []metav1.Condition{readyTrue}, ready: true},
		{name: "reconciling", conds: []metav1.Condition{reconcilingOn}, reconciling: true},
		{name: "stalled", conds: []metav1.Condition{stalledOn}, isStalled: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if IsReady(tt.conds) != tt.ready || IsReconciling(tt.conds) != tt.reconciling || IsStalled(tt.conds) != tt.isStalled {
				t.Errorf("IsReady/IsReconciling/IsStalled = %v/%v/%v, want %v/%v/%v",
					IsReady(tt.conds), IsReconciling(tt.conds), IsStalled(tt.conds), tt.ready, tt.reconciling, tt.isStalled)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{name: "short", in: "abc", n: 10, want: "abc"},
		{name: "exact", in: "abcdefghij", n: 10, want: "abcdefghij"},
		{name: "cut", in: "abcdefghijk", n: 10, want: "abcdefg..."},
		{name: "cut after a whole rune", in: "abcdeéfghij", n: 10, want: "abcdeé..."},
		{name: "cut never splits a rune", in: "abcdeéfghij", n: 9, want: "abcde..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Truncate(tt.in, tt.n); got != tt.want {
				t.Errorf("truncate = %q, want %q", got, tt.want)
			}
		})
	}
	long := strings.Repeat("x", MaxConditionMessage+1)
	var conds []metav1.Condition
	MarkStalled(&conds, 1, "SpecInvalid", long)
	if got := len(conds[1].Message); got != MaxConditionMessage {
		t.Errorf("message length = %d, want %d", got, MaxConditionMessage)
	}
}
