package reconcile

import (
	"cmp"
	"unicode/utf8"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// The condition types, reasons and messages are the API's (api/pulumi/v1),
// which writes down the Pulumi Kubernetes Operator v2's contract to the
// letter; they are repeated here under short names for the controllers.
const (
	// ReadyCondition summarizes the object: True when it is up to date.
	ReadyCondition = pulumiv1.ReadyCondition
	// ReconcilingCondition is True while the object is being processed.
	ReconcilingCondition = pulumiv1.ReconcilingCondition
	// StalledCondition is True when only a human can move the object on.
	StalledCondition = pulumiv1.StalledCondition

	// ReadyCompletedReason is Ready=True's reason.
	ReadyCompletedReason = pulumiv1.ReadyCompletedReason
	// NotReadyInProgressReason is Ready=False's reason while Reconciling=True.
	NotReadyInProgressReason = pulumiv1.NotReadyInProgressReason
	// NotReadyStalledReason is Ready=False's reason while Stalled=True.
	NotReadyStalledReason = pulumiv1.NotReadyStalledReason
	// InProgressMessage is Ready=False's message while Reconciling=True.
	InProgressMessage = pulumiv1.NotReadyInProgressMessage
	// StalledMessage is Ready=False's message while Stalled=True.
	StalledMessage = pulumiv1.NotReadyStalledMessage
	// DefaultReadyMessage is Ready=True's message when the caller gives none.
	DefaultReadyMessage = pulumiv1.ReadyCompletedMessage

	// ReconcilingProcessingReason: the object is being processed.
	ReconcilingProcessingReason = pulumiv1.ReconcilingProcessingReason
	// ReconcilingRetryReason: an attempt failed and will be retried; the
	// reason of an error that has none of its own.
	ReconcilingRetryReason = pulumiv1.ReconcilingRetryReason
	// StalledSpecInvalidReason: the spec cannot be acted on as written.
	StalledSpecInvalidReason = pulumiv1.StalledSpecInvalidReason
)

// MarkReconciling records that the object is being processed:
// Reconciling=True with reason and msg, Ready=False (NotReadyInProgress,
// "reconciliation is in progress"), and no Stalled condition. generation is
// the metadata.generation the conditions were computed from. An empty reason
// becomes ReconcilingProcessingReason (the API server rejects an empty one);
// a message longer than the API allows is cut.
//
// Reconciling's lastTransitionTime is when it last became True or changed
// its reason, so that it says how long the current activity or failure has
// lasted (Escalate reads it).
func MarkReconciling(conds *[]metav1.Condition, generation int64, reason, msg string) {
	reason = cmp.Or(reason, ReconcilingProcessingReason)
	apimeta.RemoveStatusCondition(conds, StalledCondition)
	set(conds, generation, ReadyCondition, metav1.ConditionFalse, NotReadyInProgressReason, InProgressMessage)
	if c := apimeta.FindStatusCondition(*conds, ReconcilingCondition); c != nil && c.Reason != reason {
		apimeta.RemoveStatusCondition(conds, ReconcilingCondition)
	}
	set(conds, generation, ReconcilingCondition, metav1.ConditionTrue, reason, msg)
}

// MarkStalled records that the object cannot progress until a human changes
// something: Stalled=True with reason and msg, Ready=False (NotReadyStalled,
// "reconciliation is stalled"), and no Reconciling condition. An empty
// reason becomes StalledSpecInvalidReason.
func MarkStalled(conds *[]metav1.Condition, generation int64, reason, msg string) {
	apimeta.RemoveStatusCondition(conds, ReconcilingCondition)
	set(conds, generation, ReadyCondition, metav1.ConditionFalse, NotReadyStalledReason, StalledMessage)
	set(conds, generation, StalledCondition, metav1.ConditionTrue, cmp.Or(reason, StalledSpecInvalidReason), msg)
}

// MarkReady records that the object is up to date: Ready=True
// (ProcessingCompleted) with msg, or DefaultReadyMessage when msg is empty,
// and neither Reconciling nor Stalled.
func MarkReady(conds *[]metav1.Condition, generation int64, msg string) {
	if msg == "" {
		msg = DefaultReadyMessage
	}
	apimeta.RemoveStatusCondition(conds, ReconcilingCondition)
	apimeta.RemoveStatusCondition(conds, StalledCondition)
	set(conds, generation, ReadyCondition, metav1.ConditionTrue, ReadyCompletedReason, msg)
}

// IsReady reports whether Ready is True.
func IsReady(conds []metav1.Condition) bool {
	return apimeta.IsStatusConditionTrue(conds, ReadyCondition)
}

// IsStalled reports whether Stalled is True.
func IsStalled(conds []metav1.Condition) bool {
	return apimeta.IsStatusConditionTrue(conds, StalledCondition)
}

// IsReconciling reports whether Reconciling is True.
func IsReconciling(conds []metav1.Condition) bool {
	return apimeta.IsStatusConditionTrue(conds, ReconcilingCondition)
}

// set writes one condition. apimeta.SetStatusCondition keeps the
// LastTransitionTime of a condition whose status does not change, and sets
// it to now when it does or when the condition is new.
func set(conds *[]metav1.Condition, generation int64, typ string, status metav1.ConditionStatus, reason, msg string) {
	apimeta.SetStatusCondition(conds, metav1.Condition{
		Type:               typ,
		Status:             status,
		ObservedGeneration: generation,
		Reason:             reason,
		Message:            Truncate(msg, MaxConditionMessage),
	})
}

// MaxConditionMessage is the API server's limit on a condition message, in
// bytes.
const MaxConditionMessage = 32768

// Truncate cuts s to at most n bytes on a rune boundary, marking the cut,
// so that a long error still fits a condition message.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "..."
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
