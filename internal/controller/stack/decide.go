package stack

import (
	"time"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// MaxConsecutiveFailures is how many failed updates in a row a Stack gets
// before it stalls (Stalled=True, reason UpdateFailed): from then on it waits
// for its spec, its source or a reconcile request to change instead of being
// retried forever. Below it, failures are retried with backoff.
const MaxConsecutiveFailures = 3

// Trigger says why an update is due. The order of the constants is the order
// in which Decide looks for them: the first that applies wins.
type Trigger string

// The triggers of an update, in the order they are checked.
const (
	// TriggerFirstUpdate: the stack has never been updated.
	TriggerFirstUpdate Trigger = "NoLastUpdate"
	// TriggerGeneration: the spec changed since the last update.
	TriggerGeneration Trigger = "GenerationChanged"
	// TriggerReconcileRequest: the pulumi.com/reconciliation-request
	// annotation changed since the last update.
	TriggerReconcileRequest Trigger = "ReconcileRequested"
	// TriggerRevision: the source has a revision (commit, artifact) the last
	// update did not run.
	TriggerRevision Trigger = "NewRevision"
	// TriggerDrift: a drift check found drift and
	// spec.driftDetection.remediate is set.
	TriggerDrift Trigger = "DriftDetected"
	// TriggerRetry: the last update failed and its cooldown is over.
	TriggerRetry Trigger = "RetryAfterFailure"
	// TriggerResync: continueResyncOnCommitMatch is set and
	// resyncFrequencySeconds passed since the last update.
	TriggerResync Trigger = "Resync"
)

// Observed is what the controller saw of a Stack and its source this time.
type Observed struct {
	// Generation is the Stack's metadata.generation.
	Generation int64
	// ReconcileRequest is the value of the reconciliation-request annotation.
	ReconcileRequest string
	// Revision is the source's current revision.
	Revision string
	// Now is the time of the decision.
	Now time.Time
	// MinResync is the shortest resync interval; zero means
	// DefaultMinResync. Only tests lower it.
	MinResync time.Duration
	// Drifted is true when a drift check found drift that no update has
	// undone yet, and remediation is asked for.
	Drifted bool
	// Watched is true when a new revision wakes the Stack (Source.Watched):
	// with nothing due it is looked at again after WatchedResync, not
	// after its resync interval.
	Watched bool
}

// DefaultMinResync is the shortest interval between polls or resyncs of a
// stack, whatever resyncFrequencySeconds says (upstream's minimum).
const DefaultMinResync = time.Minute

// WatchedResync is how often a Stack whose source is watched is looked at
// with nothing due: a safety net, since every change that can make an
// update due (spec, reconcile request, new revision, prerequisite, its
// Workspace and Updates) wakes it.
const WatchedResync = 10 * time.Minute

// Decision is what Decide concluded.
type Decision struct {
	// Due is true when an update must be started now.
	Due bool
	// Trigger says why, when Due.
	Trigger Trigger
	// Stalled is true when the stack failed MaxConsecutiveFailures times in
	// a row and nothing changed since: no update until something does.
	Stalled bool
	// RetryAfter is how long the failure cooldown still runs when the last
	// update failed and it is not over yet.
	RetryAfter time.Duration
	// RequeueAfter is when the controller should look again when nothing is
	// due: the polling/resync interval or the rest of a cooldown.
	RequeueAfter time.Duration
}

// ResyncInterval is how often a stack's source is polled and, with
// continueResyncOnCommitMatch, the stack run again: resyncFrequencySeconds,
// 60 seconds by default and never less than floor (DefaultMinResync when
// zero): smaller values are accepted, as the upstream operator accepts them,
// and run as the floor.
func ResyncInterval(spec *shared.StackSpec, floor time.Duration) time.Duration {
	if floor <= 0 {
		floor = DefaultMinResync
	}
	return sreconcile.Interval(spec.ResyncFrequencySeconds, DefaultMinResync, floor)
}

// Decide says whether a Stack needs an update, given its spec, the state of
// its last update and what was observed now. It is pure so that every rule
// of the upstream operator's triggering, and where stackyard differs, is one
// table-driven test.
func Decide(spec *shared.StackSpec, last *shared.StackUpdateState, obs Observed) Decision {
	interval := ResyncInterval(spec, obs.MinResync)
	// idle is when to look again with nothing due but a new revision.
	idle := interval
	if obs.Watched {
		idle = max(interval, WatchedResync)
	}
	switch {
	case last == nil:
		return Decision{Due: true, Trigger: TriggerFirstUpdate}
	case last.Generation != obs.Generation:
		return Decision{Due: true, Trigger: TriggerGeneration}
	case last.ReconcileRequest != obs.ReconcileRequest:
		return Decision{Due: true, Trigger: TriggerReconcileRequest}
	case obs.Revision != "" && obs.Revision != last.LastAttemptedCommit:
		return Decision{Due: true, Trigger: TriggerRevision}
	case obs.Drifted && last.State == shared.SucceededStackStateMessage:
		return Decision{Due: true, Trigger: TriggerDrift}
	}

	if last.State == shared.FailedStackStateMessage {
		if last.Failures >= MaxConsecutiveFailures {
			// Still look for a new revision: it is one of the changes
			// that lift the stall.
			return Decision{Stalled: true, RequeueAfter: idle}
		}
		cooldown := sreconcile.FailureCooldown(last.Failures, spec.RetryMaxBackoffDurationSeconds)
		if wait := sreconcile.Remaining(last.LastResyncTime.Time, cooldown, obs.Now); wait > 0 {
			return Decision{RetryAfter: wait, RequeueAfter: min(wait, interval)}
		}
		return Decision{Due: true, Trigger: TriggerRetry}
	}

	if spec.ContinueResyncOnCommitMatch {
		wait := sreconcile.Remaining(last.LastResyncTime.Time, interval, obs.Now)
		if wait <= 0 {
			return Decision{Due: true, Trigger: TriggerResync}
		}
		return Decision{RequeueAfter: wait}
	}
	return Decision{RequeueAfter: idle}
}
