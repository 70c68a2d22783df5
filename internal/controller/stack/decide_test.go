package stack

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackyard/stackyard/api/pulumi/shared"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	obs := Observed{Generation: 2, ReconcileRequest: "r1", Revision: "c2", Now: now}
	succeeded := func(mut ...func(*shared.StackUpdateState)) *shared.StackUpdateState {
		s := &shared.StackUpdateState{
			Generation: 2, ReconcileRequest: "r1", State: shared.SucceededStackStateMessage,
			LastAttemptedCommit: "c2", LastSuccessfulCommit: "c2", LastResyncTime: ago(10 * time.Second),
		}
		for _, m := range mut {
			m(s)
		}
		return s
	}
	failed := func(failures int64, since time.Duration) *shared.StackUpdateState {
		return succeeded(func(s *shared.StackUpdateState) {
			s.State, s.Failures, s.LastSuccessfulCommit, s.LastResyncTime = shared.FailedStackStateMessage, failures, "c1", ago(since)
		})
	}

	tests := []struct {
		name string
		spec shared.StackSpec
		last *shared.StackUpdateState
		obs  Observed
		want Decision
	}{{
		name: "never updated",
		last: nil,
		want: Decision{Due: true, Trigger: TriggerFirstUpdate},
	}, {
		name: "up to date: poll again after the default interval",
		last: succeeded(),
		want: Decision{RequeueAfter: time.Minute},
	}, {
		name: "spec changed",
		last: succeeded(func(s *shared.StackUpdateState) { s.Generation = 1 }),
		want: Decision{Due: true, Trigger: TriggerGeneration},
	}, {
		name: "reconcile request changed",
		last: succeeded(func(s *shared.StackUpdateState) { s.ReconcileRequest = "r0" }),
		want: Decision{Due: true, Trigger: TriggerReconcileRequest},
	}, {
		name: "new commit on the branch",
		last: succeeded(func(s *shared.StackUpdateState) { s.LastAttemptedCommit, s.LastSuccessfulCommit = "c1", "c1" }),
		want: Decision{Due: true, Trigger: TriggerRevision},
	}, {
		name: "generation is checked before the revision",
		last: succeeded(func(s *shared.StackUpdateState) { s.Generation, s.LastAttemptedCommit = 1, "c1" }),
		want: Decision{Due: true, Trigger: TriggerGeneration},
	}, {
		name: "resync interval from the spec",
		spec: shared.StackSpec{ResyncFrequencySeconds: 300},
		last: succeeded(),
		want: Decision{RequeueAfter: 5 * time.Minute},
	}, {
		name: "resync below 60 seconds runs as 60",
		spec: shared.StackSpec{ResyncFrequencySeconds: 30},
		last: succeeded(),
		want: Decision{RequeueAfter: time.Minute},
	}, {
		name: "continueResyncOnCommitMatch: not yet",
		spec: shared.StackSpec{ContinueResyncOnCommitMatch: true, ResyncFrequencySeconds: 120},
		last: succeeded(),
		want: Decision{RequeueAfter: 110 * time.Second},
	}, {
		name: "continueResyncOnCommitMatch: interval passed",
		spec: shared.StackSpec{ContinueResyncOnCommitMatch: true, ResyncFrequencySeconds: 120},
		last: succeeded(func(s *shared.StackUpdateState) { s.LastResyncTime = ago(2 * time.Minute) }),
		want: Decision{Due: true, Trigger: TriggerResync},
	}, {
		name: "first failure cools down 30s",
		last: failed(1, 10*time.Second),
		want: Decision{RetryAfter: 20 * time.Second, RequeueAfter: 20 * time.Second},
	}, {
		name: "first failure cooled down: retry",
		last: failed(1, 31*time.Second),
		want: Decision{Due: true, Trigger: TriggerRetry},
	}, {
		name: "second failure cools down 90s, polling meanwhile",
		last: failed(2, 0),
		want: Decision{RetryAfter: 90 * time.Second, RequeueAfter: time.Minute},
	}, {
		name: "retryMaxBackoffDurationSeconds caps the cooldown",
		spec: shared.StackSpec{RetryMaxBackoffDurationSeconds: 40},
		last: failed(2, 41*time.Second),
		want: Decision{Due: true, Trigger: TriggerRetry},
	}, {
		name: "three failures stall",
		last: failed(3, 48*time.Hour),
		want: Decision{Stalled: true, RequeueAfter: time.Minute},
	}, {
		name: "a stall is lifted by a spec change",
		last: func() *shared.StackUpdateState { s := failed(3, 0); s.Generation = 1; return s }(),
		want: Decision{Due: true, Trigger: TriggerGeneration},
	}, {
		name: "a stall is lifted by a new revision",
		last: func() *shared.StackUpdateState { s := failed(3, 0); s.LastAttemptedCommit = "c1"; return s }(),
		want: Decision{Due: true, Trigger: TriggerRevision},
	}, {
		name: "a stall is lifted by a reconcile request",
		last: func() *shared.StackUpdateState { s := failed(5, 0); s.ReconcileRequest = "r0"; return s }(),
		want: Decision{Due: true, Trigger: TriggerReconcileRequest},
	}, {
		name: "drift to remediate",
		last: succeeded(),
		obs:  Observed{Generation: 2, ReconcileRequest: "r1", Revision: "c2", Now: now, Drifted: true},
		want: Decision{Due: true, Trigger: TriggerDrift},
	}, {
		name: "drift on a failed stack is the retry's business",
		last: failed(1, 10*time.Second),
		obs:  Observed{Generation: 2, ReconcileRequest: "r1", Revision: "c2", Now: now, Drifted: true},
		want: Decision{RetryAfter: 20 * time.Second, RequeueAfter: 20 * time.Second},
	}, {
		name: "watched source: up to date, looked at again after the safety net",
		last: succeeded(),
		obs:  Observed{Generation: 2, ReconcileRequest: "r1", Revision: "c2", Now: now, Watched: true},
		want: Decision{RequeueAfter: WatchedResync},
	}, {
		name: "watched source: a longer resync interval is kept",
		spec: shared.StackSpec{ResyncFrequencySeconds: 3600},
		last: succeeded(),
		obs:  Observed{Generation: 2, ReconcileRequest: "r1", Revision: "c2", Now: now, Watched: true},
		want: Decision{RequeueAfter: time.Hour},
	}, {
		name: "watched source: a stall waits for the watch",
		last: failed(3, 48*time.Hour),
		obs:  Observed{Generation: 2, ReconcileRequest: "r1", Revision: "c2", Now: now, Watched: true},
		want: Decision{Stalled: true, RequeueAfter: WatchedResync},
	}, {
		name: "watched source: the retry cooldown keeps its timer",
		last: failed(2, 0),
		obs:  Observed{Generation: 2, ReconcileRequest: "r1", Revision: "c2", Now: now, Watched: true},
		want: Decision{RetryAfter: 90 * time.Second, RequeueAfter: time.Minute},
	}, {
		name: "watched source: continueResyncOnCommitMatch keeps its timer",
		spec: shared.StackSpec{ContinueResyncOnCommitMatch: true, ResyncFrequencySeconds: 120},
		last: succeeded(),
		obs:  Observed{Generation: 2, ReconcileRequest: "r1", Revision: "c2", Now: now, Watched: true},
		want: Decision{RequeueAfter: 110 * time.Second},
	}, {
		name: "unknown revision (source not resolved) does not trigger",
		last: succeeded(),
		obs:  Observed{Generation: 2, ReconcileRequest: "r1", Now: now},
		want: Decision{RequeueAfter: time.Minute},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := obs
			if tt.obs != (Observed{}) {
				o = tt.obs
			}
			if got := Decide(&tt.spec, tt.last, o); got != tt.want {
				t.Errorf("Decide() = %+v, want %+v", got, tt.want)
			}
		})
	}
}
