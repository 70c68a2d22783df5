package update

import "time"

// Results an Update's operation can end with, as reported to Metrics.
const (
	// ResultSucceeded: the operation finished without error.
	ResultSucceeded = "succeeded"
	// ResultFailed: the operation ran and failed (program, resource or
	// agent error).
	ResultFailed = "failed"
	// ResultConflict: the operation could not start because the stack or
	// the agent was busy with another operation.
	ResultConflict = "conflict"
	// ResultInterrupted: the operator or the agent stopped while the
	// operation ran.
	ResultInterrupted = "interrupted"
	// ResultCancelled: the Update was deleted while its operation ran.
	ResultCancelled = "cancelled"
)

// Metrics receives one observation per finished Update, so that the
// manager can export them (e.g. as a Prometheus histogram) without this
// package depending on a metrics library.
type Metrics interface {
	// ObserveUpdate records that an Update of updateType (preview, up,
	// destroy, refresh) ended with result (one of the Result* constants)
	// after running for duration. It is called once per outcome, after the
	// outcome has been written to the Update's status, and must not block.
	ObserveUpdate(updateType, result string, duration time.Duration)
	// ObserveRefusal records that the choke point (change.Authorize)
	// refused an Update of updateType before it ran, for reason (one of
	// change's Refused* constants). It must not block.
	ObserveRefusal(updateType, reason string)
}

// NopMetrics discards every observation; it is the default when
// Options.Metrics is nil.
type NopMetrics struct{}

// ObserveUpdate does nothing.
func (NopMetrics) ObserveUpdate(string, string, time.Duration) {}

// ObserveRefusal does nothing.
func (NopMetrics) ObserveRefusal(string, string) {}
