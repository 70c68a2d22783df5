package v1alpha1

import (
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestUpdateStatusMarkers(t *testing.T) {
	type state struct {
		progressing, complete, failed metav1.ConditionStatus
		reason                        string
		isComplete, isFailed          bool
	}
	tests := []struct {
		name string
		mark func(s *UpdateStatus)
		want state
	}{
		{
			name: "pending",
			mark: func(s *UpdateStatus) { s.MarkProgressing(UpdateReasonPending, "waiting for the workspace") },
			want: state{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionFalse, UpdateReasonPending, false, false},
		},
		{
			name: "succeeded after running",
			mark: func(s *UpdateStatus) {
				s.MarkProgressing(UpdateReasonInProgress, "")
				s.MarkSucceeded("3 resources updated")
			},
			want: state{metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse, UpdateReasonSucceeded, true, false},
		},
		{
			name: "failed after running",
			mark: func(s *UpdateStatus) {
				s.MarkProgressing(UpdateReasonInProgress, "")
				s.MarkFailed(UpdateReasonConflict, "another update is in progress")
			},
			want: state{metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionTrue, UpdateReasonConflict, true, true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &UpdateStatus{}
			tt.mark(s)
			for typ, want := range map[string]metav1.ConditionStatus{
				UpdateConditionTypeProgressing: tt.want.progressing,
				UpdateConditionTypeComplete:    tt.want.complete,
				UpdateConditionTypeFailed:      tt.want.failed,
			} {
				c := apimeta.FindStatusCondition(s.Conditions, typ)
				if c == nil {
					t.Fatalf("%s: missing", typ)
				}
				if c.Status != want || c.Reason != tt.want.reason {
					t.Errorf("%s: got %s/%s, want %s/%s", typ, c.Status, c.Reason, want, tt.want.reason)
				}
			}
			if s.IsComplete() != tt.want.isComplete || s.IsFailed() != tt.want.isFailed {
				t.Errorf("IsComplete=%v IsFailed=%v, want %v %v", s.IsComplete(), s.IsFailed(), tt.want.isComplete, tt.want.isFailed)
			}
		})
	}
}

func TestWorkspaceStatusPredicates(t *testing.T) {
	tests := []struct {
		name       string
		conditions []metav1.Condition
		ready      bool
		stalled    bool
	}{
		{name: "no conditions"},
		{
			name:       "ready",
			conditions: []metav1.Condition{{Type: WorkspaceReady, Status: metav1.ConditionTrue, Reason: WorkspaceReasonSucceeded}},
			ready:      true,
		},
		{
			name:       "pending",
			conditions: []metav1.Condition{{Type: WorkspaceReady, Status: metav1.ConditionFalse, Reason: WorkspaceReasonPending}},
		},
		{
			name: "stalled",
			conditions: []metav1.Condition{
				{Type: WorkspaceReady, Status: metav1.ConditionFalse, Reason: WorkspaceReasonInstallFailed},
				{Type: WorkspaceStalled, Status: metav1.ConditionTrue, Reason: WorkspaceReasonInstallFailed},
			},
			stalled: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &WorkspaceStatus{Conditions: tt.conditions}
			if s.IsReady() != tt.ready || s.IsStalled() != tt.stalled {
				t.Errorf("IsReady=%v IsStalled=%v, want %v %v", s.IsReady(), s.IsStalled(), tt.ready, tt.stalled)
			}
		})
	}
}
