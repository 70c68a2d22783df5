package reconcile

import (
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The errors below are typed by what happens next, not by what went wrong:
// the controller returns one of them from a step, and ComputeResult,
// Summarize and EventType turn it into a result, conditions and an event in
// one place. Each carries a Reason, which becomes the reason of the Stalled
// or Reconciling condition (a CamelCase kstatus reason such as
// "SourceUnavailable", "SpecInvalid" or "PrerequisiteNotSatisfied"), and the
// underlying error, whose text becomes the condition message and the event
// note.
//
// Messages end up in the object's status and in events, which anyone who
// can read the object can read: the caller must make sure the wrapped error
// never contains a secret (a token, a password, a URL with credentials, the
// value of a secret config key). These types only carry the text they are
// given.

// DefaultWaitInterval is how long a Waiting error without its own interval
// waits before the object is looked at again.
const DefaultWaitInterval = 10 * time.Second

// Stalling reports that the reconcile cannot progress until a human changes
// something (the spec, a referenced object, credentials). It leads to
// Stalled=True and a Warning event; a change to the object (a new generation
// or a reconcile request) starts over. Without RequeueAfter nothing else
// retries it; with it, the object is also looked at again after that long,
// for stalls whose cause is usually fixed outside the object (a Secret, a
// git host, another update holding the stack's lock).
type Stalling struct {
	// Reason is the Stalled condition's reason, e.g. "SpecInvalid".
	Reason string
	// Err is what went wrong; its text is the condition message.
	Err error
	// RequeueAfter, when positive, is when to look again although stalled.
	RequeueAfter time.Duration
}

// NewStalling returns a Stalling error with the given condition reason,
// retried only when the object changes.
func NewStalling(reason string, err error) *Stalling {
	return &Stalling{Reason: reason, Err: err}
}

// NewStallingRequeue returns a Stalling error that is also looked at again
// after requeueAfter, so that a fix made outside the object lifts it.
func NewStallingRequeue(reason string, err error, requeueAfter time.Duration) *Stalling {
	return &Stalling{Reason: reason, Err: err, RequeueAfter: requeueAfter}
}

// Error returns the underlying error's text, or the reason when there is none.
func (e *Stalling) Error() string { return message(e.Reason, e.Err) }

// Unwrap returns the underlying error, so errors.Is and errors.As see it.
func (e *Stalling) Unwrap() error { return e.Err }

// Waiting reports that a dependency is not ready yet (a prerequisite stack,
// a workspace, a source artifact). It leads to Reconciling=True, a requeue
// after a fixed interval without backoff, and a Normal event.
//
// A wait for something that takes its time (an update, a prerequisite) may
// last as long as it lasts. A wait for something that should simply be
// there (a referenced Secret or Program) is Bounded: once the same wait has
// lasted longer than the controller's stall bound, Escalate turns it into a
// stall, so that it shows as Stalled instead of in progress forever.
type Waiting struct {
	// Reason is the Reconciling condition's reason, e.g.
	// "PrerequisiteNotSatisfied".
	Reason string
	// Err says what is awaited; its text is the condition message.
	Err error
	// RequeueAfter is when to look again; zero means DefaultWaitInterval.
	RequeueAfter time.Duration
	// Bounded makes a wait that lasts longer than the stall bound a stall.
	Bounded bool
}

// NewWaiting returns a Waiting error that requeues after requeueAfter, or
// after DefaultWaitInterval when requeueAfter is not positive.
func NewWaiting(reason string, err error, requeueAfter time.Duration) *Waiting {
	return &Waiting{Reason: reason, Err: err, RequeueAfter: requeueAfter}
}

// NewMissing returns a Bounded Waiting error for a referenced object that
// does not exist (yet): it is looked for again every DefaultWaitInterval,
// and stalls once it has been missing for longer than the stall bound.
func NewMissing(reason string, err error) *Waiting {
	return &Waiting{Reason: reason, Err: err, Bounded: true}
}

// Error returns the underlying error's text, or the reason when there is none.
func (e *Waiting) Error() string { return message(e.Reason, e.Err) }

// Unwrap returns the underlying error, so errors.Is and errors.As see it.
func (e *Waiting) Unwrap() error { return e.Err }

// Interval returns how long to wait before the next attempt.
func (e *Waiting) Interval() time.Duration {
	if e.RequeueAfter <= 0 {
		return DefaultWaitInterval
	}
	return e.RequeueAfter
}

// Generic reports a failure that may pass (an API call failed, a pod was
// evicted). It is returned to controller-runtime, whose rate limiter retries
// with exponential backoff; it leads to Reconciling=True and a Warning event.
// An error of no type of this package is treated the same way, with the
// reason ReconcilingRetryReason. Once the same failure has lasted longer
// than the stall bound, Escalate turns it into a stall (see escalate.go).
type Generic struct {
	// Reason is the Reconciling condition's reason; empty means
	// ReconcilingRetryReason.
	Reason string
	// Err is what went wrong; its text is the condition message.
	Err error
}

// NewGeneric returns a Generic error with the given condition reason.
func NewGeneric(reason string, err error) *Generic {
	return &Generic{Reason: reason, Err: err}
}

// Error returns the underlying error's text, or the reason when there is none.
func (e *Generic) Error() string { return message(e.Reason, e.Err) }

// Unwrap returns the underlying error, so errors.Is and errors.As see it.
func (e *Generic) Unwrap() error { return e.Err }

// Ignore reports that there is nothing to do (the object is being deleted by
// someone else, a watched event did not concern it). It is treated as a
// success: no error is returned, no event is emitted.
type Ignore struct {
	// Reason says why there was nothing to do, for logs.
	Reason string
	// Err is the underlying condition, if any.
	Err error
}

// NewIgnore returns an Ignore error with the given reason.
func NewIgnore(reason string, err error) *Ignore {
	return &Ignore{Reason: reason, Err: err}
}

// Error returns the underlying error's text, or the reason when there is none.
func (e *Ignore) Error() string { return message(e.Reason, e.Err) }

// Unwrap returns the underlying error, so errors.Is and errors.As see it.
func (e *Ignore) Unwrap() error { return e.Err }

// Reason returns the condition reason carried by err: that of the
// outermost error of this package's types in err's chain,
// ReconcilingRetryReason for an error of no such type (or a Generic without
// a reason), and "" for nil.
func Reason(err error) string {
	_, reason := classify(err)
	return reason
}

// EventType returns the type of the Kubernetes event err deserves: Warning
// for Stalling, Generic and untyped errors, Normal for Waiting, and "" (no
// event) for Ignore and nil.
func EventType(err error) string {
	switch k, _ := classify(err); k {
	case kindNone, kindIgnore:
		return ""
	case kindWaiting:
		return corev1.EventTypeNormal
	default:
		return corev1.EventTypeWarning
	}
}

// kind is what happens next after an error.
type kind int

const (
	kindNone kind = iota
	kindGeneric
	kindStalling
	kindWaiting
	kindIgnore
)

// typed is implemented by this package's error types.
type typed interface {
	error
	kind() (kind, string)
}

func (e *Stalling) kind() (kind, string) { return kindStalling, e.Reason }
func (e *Waiting) kind() (kind, string)  { return kindWaiting, e.Reason }
func (e *Ignore) kind() (kind, string)   { return kindIgnore, e.Reason }
func (e *Generic) kind() (kind, string) {
	if e.Reason == "" {
		return kindGeneric, ReconcilingRetryReason
	}
	return kindGeneric, e.Reason
}

// classify returns the kind and reason of the outermost typed error in err's
// chain, so that a step wrapping a Waiting error in a Stalling one (or the
// other way round) decides what happens.
func classify(err error) (kind, string) {
	if err == nil {
		return kindNone, ""
	}
	var t typed
	if errors.As(err, &t) {
		return t.kind()
	}
	return kindGeneric, ReconcilingRetryReason
}

// message is the text of a typed error: the wrapped error's, else the reason.
func message(reason string, err error) string {
	if err == nil {
		return reason
	}
	return err.Error()
}
