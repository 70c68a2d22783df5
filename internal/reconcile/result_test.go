package reconcile

import (
	"errors"
	"fmt"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// fixedRand returns a random source that always yields r.
func fixedRand(r float64) func() float64 { return func() float64 { return r } }

func TestComputeResult(t *testing.T) {
	poll := Schedule{Interval: 100 * time.Second, Rand: fixedRand(0.75)}
	wrappedGeneric := fmt.Errorf("calling the agent: %w", NewGeneric("", errCause))
	tests := []struct {
		name    string
		res     Result
		err     error
		sched   Schedule
		want    ctrl.Result
		wantErr error
	}{
		{name: "empty", res: ResultEmpty, want: ctrl.Result{}},
		{name: "requeue default", res: ResultRequeue, want: ctrl.Result{RequeueAfter: DefaultRequeueAfter}},
		{name: "requeue scheduled", res: ResultRequeue, sched: Schedule{RequeueAfter: 5 * time.Second}, want: ctrl.Result{RequeueAfter: 5 * time.Second}},
		{name: "success without polling", res: ResultSuccess, want: ctrl.Result{}},
		{name: "success polls with jitter", res: ResultSuccess, sched: poll, want: ctrl.Result{RequeueAfter: 102500 * time.Millisecond}},
		{name: "success polls without jitter", res: ResultSuccess, sched: Schedule{Interval: time.Minute, JitterFraction: -1}, want: ctrl.Result{RequeueAfter: time.Minute}},
		{name: "stalling: no error, no requeue", res: ResultSuccess, err: NewStalling("SpecInvalid", errCause), sched: poll, want: ctrl.Result{}},
		{name: "stalling with requeue: no error, looked at again", err: NewStallingRequeue("SourceUnavailable", errCause, time.Minute), want: ctrl.Result{RequeueAfter: time.Minute}},
		{name: "waiting: fixed requeue", res: ResultEmpty, err: NewWaiting("PrerequisiteNotSatisfied", errCause, 30*time.Second), want: ctrl.Result{RequeueAfter: 30 * time.Second}},
		{name: "waiting: default interval", err: NewWaiting("PrerequisiteNotSatisfied", errCause, 0), want: ctrl.Result{RequeueAfter: DefaultWaitInterval}},
		{name: "generic: returned", res: ResultRequeue, err: wrappedGeneric, want: ctrl.Result{}, wantErr: wrappedGeneric},
		{name: "untyped: returned", err: errCause, want: ctrl.Result{}, wantErr: errCause},
		{name: "ignore: success", res: ResultEmpty, err: NewIgnore("Gone", nil), sched: poll, want: ctrl.Result{RequeueAfter: 102500 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ComputeResult(tt.res, tt.err, tt.sched)
			if got != tt.want {
				t.Errorf("result = %+v, want %+v", got, tt.want)
			}
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestComputeResultDefaultJitterStaysInBounds(t *testing.T) {
	for range 100 {
		got, _ := ComputeResult(ResultSuccess, nil, Schedule{Interval: 100 * time.Second})
		if got.RequeueAfter < 95*time.Second || got.RequeueAfter > 105*time.Second {
			t.Fatalf("RequeueAfter = %v, want within 100s ± 5%%", got.RequeueAfter)
		}
	}
}

func TestResultString(t *testing.T) {
	tests := []struct {
		res  Result
		want string
	}{
		{ResultEmpty, "Empty"}, {ResultRequeue, "Requeue"}, {ResultSuccess, "Success"}, {Result(9), "Unknown"},
	}
	for _, tt := range tests {
		if got := tt.res.String(); got != tt.want {
			t.Errorf("%d.String() = %q, want %q", int(tt.res), got, tt.want)
		}
	}
}
