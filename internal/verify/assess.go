package verify

import "time"

// Phases of a check and of a whole verification, besides Failed (more
// than failureLimit measurements failed).
const (
	// Running: more measurements are to come.
	Running = "Running"
	// Succeeded: count measurements were taken with no more than
	// failureLimit failed.
	Succeeded = "Succeeded"
)

// DefaultInterval is the time between measurements when a check sets no
// interval.
const DefaultInterval = 10 * time.Second

// Policy is how a check schedules and counts its measurements.
type Policy struct {
	// InitialDelay is the wait before the first measurement, from the
	// start of verification.
	InitialDelay time.Duration
	// Interval is the time from one measurement to the next;
	// DefaultInterval when not positive.
	Interval time.Duration
	// Count is how many measurements to take; one when not positive.
	Count int32
	// FailureLimit is how many failed measurements are tolerated.
	FailureLimit int32
}

// Assess returns the phase of a check that has taken successes and
// failures measurements (an Error counts as a failure): Failed as soon as
// failures exceed the limit, Succeeded once Count were taken without
// that, Running until then.
func (p Policy) Assess(successes, failures int32) string {
	switch {
	case failures > max(p.FailureLimit, 0):
		return Failed
	case successes+failures >= max(p.Count, 1):
		return Succeeded
	default:
		return Running
	}
}

// Next returns when the next measurement is due: InitialDelay after start
// for the first (last is nil), Interval after the last one otherwise.
func (p Policy) Next(start time.Time, last *time.Time) time.Time {
	if last == nil {
		return start.Add(max(p.InitialDelay, 0))
	}
	interval := p.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	return last.Add(interval)
}
