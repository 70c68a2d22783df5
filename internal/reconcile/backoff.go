package reconcile

import (
	"math"
	"math/rand/v2"
	"time"
)

// The failure cooldown of the Pulumi Kubernetes Operator v2: after a failed
// update, wait BackoffBase × BackoffFactor^failures before the next attempt,
// never more than the stack's retryMaxBackoffDurationSeconds (when set) or
// DefaultMaxBackoff. Stacks that fail keep being retried, but a broken one
// settles at one attempt a day instead of hammering the backend.
const (
	// BackoffBase is the cooldown for a failure count of zero.
	BackoffBase = 10 * time.Second
	// BackoffFactor multiplies the cooldown with each further failure.
	BackoffFactor = 3
	// DefaultMaxBackoff caps the cooldown when the stack sets no cap.
	DefaultMaxBackoff = 24 * time.Hour
)

// DefaultJitterFraction is the ±5 % by which Jitter moves a duration when no
// fraction is given, as Flux does, so that objects created together do not
// poll in lockstep.
const DefaultJitterFraction = 0.05

// maxDuration is the longest time.Duration.
const maxDuration = time.Duration(math.MaxInt64)

// FailureCooldown returns how long to wait after failures consecutive
// failures: 10 s × 3^failures, capped at maxBackoffSeconds when it is
// positive and at DefaultMaxBackoff otherwise. Negative failure counts count
// as zero; large ones saturate at the cap without overflowing.
//
// Unlike PKO, whose first step ignores the cap, a cap below 10 s applies
// from the first failure too.
func FailureCooldown(failures, maxBackoffSeconds int64) time.Duration {
	limit := DefaultMaxBackoff
	if maxBackoffSeconds > 0 {
		limit = Seconds(maxBackoffSeconds)
	}
	d := BackoffBase
	for i := int64(0); i < failures && d < limit; i++ {
		if d > limit/BackoffFactor {
			return limit
		}
		d *= BackoffFactor
	}
	return min(d, limit)
}

// Jitter returns d moved by a uniformly random amount within ±fraction of d,
// using math/rand/v2. A fraction of zero means DefaultJitterFraction; a
// negative one means no jitter; one above 1 counts as 1, so the result is
// never negative.
func Jitter(d time.Duration, fraction float64) time.Duration {
	return JitterWith(rand.Float64, d, fraction)
}

// JitterWith is Jitter with the random source injected: rnd returns a number
// in [0, 1), where 0 gives d×(1-fraction), 0.5 gives d and values near 1
// give nearly d×(1+fraction). Tests pass a fixed source.
func JitterWith(rnd func() float64, d time.Duration, fraction float64) time.Duration {
	switch {
	case d <= 0 || fraction < 0:
		return d
	case fraction == 0:
		fraction = DefaultJitterFraction
	case fraction > 1:
		fraction = 1
	}
	r := min(max(rnd(), 0), 1)
	delta := math.Round(float64(d) * fraction * (2*r - 1))
	if delta > 0 && d > maxDuration-time.Duration(delta) {
		return maxDuration
	}
	return d + time.Duration(delta)
}

// Seconds converts a count of seconds from a spec field to a duration: zero
// for negative counts, the longest duration for counts that would overflow.
func Seconds(s int64) time.Duration {
	switch {
	case s <= 0:
		return 0
	case s > int64(maxDuration/time.Second):
		return maxDuration
	default:
		return time.Duration(s) * time.Second
	}
}

// Interval turns an interval spec field in seconds into a duration: def when
// the field is unset (zero or negative), and never less than floor. PKO's
// resync frequency is Interval(spec.resyncFrequencySeconds, 60s, 60s).
func Interval(seconds int64, def, floor time.Duration) time.Duration {
	d := def
	if seconds > 0 {
		d = Seconds(seconds)
	}
	return max(d, floor)
}

// Remaining returns how much of wait is left at now when it started at
// since, between zero and wait: the RequeueAfter for an object cooling
// down, and zero once the cooldown is over. A since in the future (clock
// skew) counts as now.
func Remaining(since time.Time, wait time.Duration, now time.Time) time.Duration {
	elapsed := max(now.Sub(since), 0)
	return max(wait-elapsed, 0)
}
