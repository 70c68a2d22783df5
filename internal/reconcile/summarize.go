package reconcile

import (
	"errors"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SummarizeOption tunes Summarize.
type SummarizeOption func(*summarizeOptions)

type summarizeOptions struct {
	readyMessage string
}

// WithReadyMessage sets the Ready=True message; without it Summarize writes
// DefaultReadyMessage, PKO's "the stack has been processed and is up to
// date". Kinds other than Stack say what is up to date for them.
func WithReadyMessage(msg string) SummarizeOption {
	return func(o *summarizeOptions) { o.readyMessage = msg }
}

// Summarize arranges Ready, Reconciling and Stalled from the outcome of one
// reconcile (the Result and error of its steps), so that however the
// reconcile ended the conditions obey the kstatus protocol. Call it in the
// deferred function that patches status, before the patch.
//
//   - Stalling: Stalled=True with the error's reason and message.
//   - Waiting, Generic, any other error: Reconciling=True with the error's
//     reason (ReconcilingRetryReason for an untyped error) and message.
//   - ResultRequeue without error: Reconciling=True, keeping the reason and
//     message a step set when Reconciling is already True, else
//     ReconcilingProcessingReason.
//   - Success, Empty, Ignore: Ready=True.
//
// It returns whether the generation was really handled (success, no-op or
// stall), i.e. whether the caller should write status.observedGeneration;
// a requeue or an error leaves it alone, so observers can tell the spec they
// see has not been acted on yet. Messages come from errors verbatim: they
// must not contain secrets.
func Summarize(conds *[]metav1.Condition, generation int64, res Result, err error, opts ...SummarizeOption) (observed bool) {
	var o summarizeOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err != nil {
		var t typed
		errors.As(err, &t)
		switch e := t.(type) {
		case *Stalling:
			MarkStalled(conds, generation, e.Reason, err.Error())
			return true
		case *Ignore:
			MarkReady(conds, generation, o.readyMessage)
			return true
		default: // Waiting, Generic, untyped
			MarkReconciling(conds, generation, Reason(err), err.Error())
			return false
		}
	}
	if res == ResultRequeue {
		reason, msg := ReconcilingProcessingReason, InProgressMessage
		if c := apimeta.FindStatusCondition(*conds, ReconcilingCondition); c != nil && c.Status == metav1.ConditionTrue {
			reason, msg = c.Reason, c.Message
		}
		MarkReconciling(conds, generation, reason, msg)
		return false
	}
	MarkReady(conds, generation, o.readyMessage)
	return true
}

// NewlyStalled reports whether conds hold a Stalled=True condition that
// before (the Stalled condition as the reconcile found it, or nil) did not:
// a stall that began, or whose reason or message changed, as stored
// (reasons defaulted, messages truncated). Controllers announce such a
// stall once, as a Warning event, not on every retry of the same one.
func NewlyStalled(before *metav1.Condition, conds []metav1.Condition) bool {
	after := apimeta.FindStatusCondition(conds, StalledCondition)
	if after == nil || after.Status != metav1.ConditionTrue {
		return false
	}
	return before == nil || before.Status != metav1.ConditionTrue || before.Reason != after.Reason || before.Message != after.Message
}
