package reconcile

import (
	"errors"
	"fmt"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultStallAfter is how long the same failure may last before Escalate
// makes it a stall: long enough for an API server restart or a rolling
// webhook to pass, short enough that a failure nobody typed never reads as
// "in progress" for good.
const DefaultStallAfter = 5 * time.Minute

// Escalate returns err, or a Stalling error in its place when err is a
// failure that has lasted longer than bound. A failure is a Generic error,
// an error of no type of this package, or a Bounded Waiting; it has lasted
// when conds, as the previous reconcile left them for this generation, show
// it already: Reconciling=True with err's reason since more than bound ago
// (MarkReconciling restarts that clock whenever the reason changes), or
// Stalled=True with err's reason.
//
// The stall keeps err's reason and message, says how long it has lasted,
// and is looked at again after bound (a Bounded Waiting after its own
// interval), so the object recovers by itself once the cause is gone. Call
// it in the deferred function, before Summarize and ComputeResult, so that
// both see the stall. A non-positive bound means DefaultStallAfter.
func Escalate(conds []metav1.Condition, generation int64, err error, now time.Time, bound time.Duration) error {
	if bound <= 0 {
		bound = DefaultStallAfter
	}
	requeue, ok := escalates(err, bound)
	if !ok {
		return err
	}
	reason := Reason(err)
	if c := apimeta.FindStatusCondition(conds, StalledCondition); c != nil {
		if c.Status == metav1.ConditionTrue && c.Reason == reason && c.ObservedGeneration == generation {
			return stalledFor(reason, err, bound, requeue)
		}
		return err
	}
	c := apimeta.FindStatusCondition(conds, ReconcilingCondition)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason || c.ObservedGeneration != generation {
		return err
	}
	if now.Sub(c.LastTransitionTime.Time) < bound {
		return err
	}
	return stalledFor(reason, err, bound, requeue)
}

// escalates reports whether err is a failure that a lasting stall may
// replace, and how soon its stall is looked at again.
func escalates(err error, bound time.Duration) (time.Duration, bool) {
	if err == nil {
		return 0, false
	}
	var t typed
	if !errors.As(err, &t) {
		return bound, true
	}
	switch e := t.(type) {
	case *Generic:
		return bound, true
	case *Waiting:
		return e.Interval(), e.Bounded
	default:
		return 0, false
	}
}

// lastingPrefix begins the message of every stall Escalate makes; it is a
// prefix so that truncating a long message keeps it.
const lastingPrefix = "unresolved for more than "

// stalledFor is the stall that replaces a lasting failure. Its message is
// the same on every reconcile, so the stall is announced once.
func stalledFor(reason string, err error, bound, requeue time.Duration) *Stalling {
	return NewStallingRequeue(reason, fmt.Errorf("%s%s: %w", lastingPrefix, bound, err), requeue)
}

// IsLastingFailure reports whether conds hold a Stalled condition that
// Escalate made from a lasting failure, as opposed to a stall a step
// returned: a controller that leaves a stalled generation alone until its
// spec changes must keep retrying the former, whose cause may pass.
func IsLastingFailure(conds []metav1.Condition) bool {
	c := apimeta.FindStatusCondition(conds, StalledCondition)
	return c != nil && c.Status == metav1.ConditionTrue && strings.HasPrefix(c.Message, lastingPrefix)
}
