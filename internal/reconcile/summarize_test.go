package reconcile

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSummarize(t *testing.T) {
	const gen = 7
	notReadyInProgress := cond(ReadyCondition, metav1.ConditionFalse, gen, NotReadyInProgressReason, InProgressMessage)
	tests := []struct {
		name         string
		start        []metav1.Condition
		res          Result
		err          error
		opts         []SummarizeOption
		want         []metav1.Condition
		wantObserved bool
	}{
		{
			name:         "success",
			start:        []metav1.Condition{reconcilingOn},
			res:          ResultSuccess,
			want:         []metav1.Condition{cond(ReadyCondition, metav1.ConditionTrue, gen, ReadyCompletedReason, DefaultReadyMessage)},
			wantObserved: true,
		},
		{
			name:         "success with a ready message",
			res:          ResultSuccess,
			opts:         []SummarizeOption{WithReadyMessage("the workspace is ready")},
			want:         []metav1.Condition{cond(ReadyCondition, metav1.ConditionTrue, gen, ReadyCompletedReason, "the workspace is ready")},
			wantObserved: true,
		},
		{
			name:         "empty counts as handled",
			start:        []metav1.Condition{stalledOn},
			res:          ResultEmpty,
			want:         []metav1.Condition{cond(ReadyCondition, metav1.ConditionTrue, gen, ReadyCompletedReason, DefaultReadyMessage)},
			wantObserved: true,
		},
		{
			name:         "ignore counts as success",
			res:          ResultEmpty,
			err:          NewIgnore("NothingToDo", nil),
			want:         []metav1.Condition{cond(ReadyCondition, metav1.ConditionTrue, gen, ReadyCompletedReason, DefaultReadyMessage)},
			wantObserved: true,
		},
		{
			name:  "stalling",
			start: []metav1.Condition{readyTrue, reconcilingOn},
			err:   fmt.Errorf("reading the program: %w", NewStalling("SourceUnavailable", errCause)),
			want: []metav1.Condition{
				cond(ReadyCondition, metav1.ConditionFalse, gen, NotReadyStalledReason, StalledMessage),
				cond(StalledCondition, metav1.ConditionTrue, gen, "SourceUnavailable", "reading the program: the cause"),
			},
			wantObserved: true,
		},
		{
			name:  "waiting",
			start: []metav1.Condition{readyTrue},
			err:   NewWaiting("PrerequisiteNotSatisfied", fmt.Errorf("prerequisite %q is not ready", "base"), 0),
			want: []metav1.Condition{
				notReadyInProgress,
				cond(ReconcilingCondition, metav1.ConditionTrue, gen, "PrerequisiteNotSatisfied", `prerequisite "base" is not ready`),
			},
		},
		{
			name:  "generic",
			start: []metav1.Condition{stalledOn},
			err:   NewGeneric("UpdateFailed", errCause),
			want: []metav1.Condition{
				notReadyInProgress,
				cond(ReconcilingCondition, metav1.ConditionTrue, gen, "UpdateFailed", "the cause"),
			},
		},
		{
			name: "untyped error retries",
			err:  errCause,
			want: []metav1.Condition{
				notReadyInProgress,
				cond(ReconcilingCondition, metav1.ConditionTrue, gen, ReconcilingRetryReason, "the cause"),
			},
		},
		{
			name:  "requeue keeps the step's reconciling reason",
			start: []metav1.Condition{reconcilingOn},
			res:   ResultRequeue,
			want: []metav1.Condition{
				notReadyInProgress,
				cond(ReconcilingCondition, metav1.ConditionTrue, gen, ReconcilingProcessingReason, "working"),
			},
		},
		{
			name:  "requeue without a reconciling condition",
			start: []metav1.Condition{readyTrue},
			res:   ResultRequeue,
			want: []metav1.Condition{
				notReadyInProgress,
				cond(ReconcilingCondition, metav1.ConditionTrue, gen, ReconcilingProcessingReason, InProgressMessage),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conds := append([]metav1.Condition(nil), tt.start...)
			observed := Summarize(&conds, gen, tt.res, tt.err, tt.opts...)
			if observed != tt.wantObserved {
				t.Errorf("observed = %v, want %v", observed, tt.wantObserved)
			}
			if diff := cmp.Diff(tt.want, conds, ignoreTime); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}
