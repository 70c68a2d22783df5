package reconcile

import (
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

var errCause = errors.New("the cause")

func TestTypedErrors(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantText   string
		wantReason string
		wantEvent  string
	}{
		{name: "nil", err: nil, wantText: "", wantReason: "", wantEvent: ""},
		{name: "untyped", err: errCause, wantText: "the cause", wantReason: ReconcilingRetryReason, wantEvent: corev1.EventTypeWarning},
		{name: "stalling", err: NewStalling(StalledSpecInvalidReason, errCause), wantText: "the cause", wantReason: "SpecInvalid", wantEvent: corev1.EventTypeWarning},
		{name: "waiting", err: NewWaiting("PrerequisiteNotSatisfied", errCause, 0), wantText: "the cause", wantReason: "PrerequisiteNotSatisfied", wantEvent: corev1.EventTypeNormal},
		{name: "generic with reason", err: NewGeneric("UpdateFailed", errCause), wantText: "the cause", wantReason: "UpdateFailed", wantEvent: corev1.EventTypeWarning},
		{name: "generic without reason", err: NewGeneric("", errCause), wantText: "the cause", wantReason: ReconcilingRetryReason, wantEvent: corev1.EventTypeWarning},
		{name: "ignore", err: NewIgnore("Deleted", errCause), wantText: "the cause", wantReason: "Deleted", wantEvent: ""},
		{name: "no underlying error: text is the reason", err: NewStalling("SpecInvalid", nil), wantText: "SpecInvalid", wantReason: "SpecInvalid", wantEvent: corev1.EventTypeWarning},
		{name: "wrapped keeps its type", err: fmt.Errorf("fetching source: %w", NewStalling("SourceUnavailable", errCause)), wantText: "fetching source: the cause", wantReason: "SourceUnavailable", wantEvent: corev1.EventTypeWarning},
		{name: "outermost type wins", err: NewWaiting("Outer", NewStalling("Inner", errCause), 0), wantText: "the cause", wantReason: "Outer", wantEvent: corev1.EventTypeNormal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err != nil && tt.err.Error() != tt.wantText {
				t.Errorf("Error() = %q, want %q", tt.err.Error(), tt.wantText)
			}
			if got := Reason(tt.err); got != tt.wantReason {
				t.Errorf("Reason() = %q, want %q", got, tt.wantReason)
			}
			if got := EventType(tt.err); got != tt.wantEvent {
				t.Errorf("EventType() = %q, want %q", got, tt.wantEvent)
			}
			wantIs := tt.err != nil && tt.wantText != tt.wantReason // every case with a cause wraps errCause
			if got := errors.Is(tt.err, errCause); got != wantIs {
				t.Errorf("errors.Is(err, cause) = %v, want %v", got, wantIs)
			}
		})
	}
}

func TestErrorsAs(t *testing.T) {
	err := fmt.Errorf("step: %w", NewWaiting("PrerequisiteNotSatisfied", errCause, time.Minute))
	var w *Waiting
	if !errors.As(err, &w) {
		t.Fatalf("errors.As(*Waiting) = false")
	}
	if w.Reason != "PrerequisiteNotSatisfied" || w.Interval() != time.Minute {
		t.Errorf("got reason %q interval %v", w.Reason, w.Interval())
	}
	var s *Stalling
	if errors.As(err, &s) {
		t.Errorf("errors.As(*Stalling) = true for a Waiting error")
	}
}

func TestWaitingInterval(t *testing.T) {
	tests := []struct {
		name  string
		after time.Duration
		want  time.Duration
	}{
		{name: "unset", after: 0, want: DefaultWaitInterval},
		{name: "negative", after: -time.Second, want: DefaultWaitInterval},
		{name: "set", after: 42 * time.Second, want: 42 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NewWaiting("R", nil, tt.after).Interval(); got != tt.want {
				t.Errorf("Interval() = %v, want %v", got, tt.want)
			}
		})
	}
}
