package v1

// Condition types of a Stack. Ready, Reconciling and Stalled follow the
// kstatus convention, so that tools that understand it (kstatus, Flux, Argo
// CD health checks) can tell a stack in progress from a finished or a stuck
// one:
//
//   - while the stack is being processed: Ready=False (NotReadyInProgress)
//     and Reconciling=True;
//   - when it cannot progress until a person changes something:
//     Ready=False (NotReadyStalled) and Stalled=True;
//   - when it is up to date: Ready=True, and neither Reconciling nor Stalled.
const (
	// ReadyCondition summarizes the stack: True when it is up to date.
	ReadyCondition = "Ready"
	// ReconcilingCondition is True while an update is pending or running,
	// including while a failed one waits to be retried.
	ReconcilingCondition = "Reconciling"
	// StalledCondition is True when the stack cannot progress until its
	// spec, its source or its environment changes.
	StalledCondition = "Stalled"
	// DriftDetectedCondition is reserved for drift detection: True when a
	// check found the resources differ from the stack's state.
	DriftDetectedCondition = "DriftDetected"
	// ChangePendingCondition is True while a change to the spec of a
	// Stack that a stage governs is held (status.heldSpec): the Stack
	// keeps what it deployed and runs nothing with the change until a
	// promotion approves it, or the spec is reverted. Its reason is
	// ChangeHeldReason.
	ChangePendingCondition = "ChangePending"
)

// ChangeHeldReason is the reason of ChangePending=True, and of
// Reconciling=True while a change is held.
const ChangeHeldReason = "ChangeHeld"

// Reasons of the Ready condition.
const (
	// ReadyCompletedReason says the stack has been processed and is up to date.
	ReadyCompletedReason = "ProcessingCompleted"
	// NotReadyInProgressReason says the stack is not ready because it is being
	// processed (Reconciling is True).
	NotReadyInProgressReason = "NotReadyInProgress"
	// NotReadyStalledReason says the stack is not ready because processing is
	// stuck (Stalled is True).
	NotReadyStalledReason = "NotReadyStalled"
)

// Messages of the Ready condition. They are the Pulumi Kubernetes Operator
// v2's, to the letter, so that tools matching on them keep working.
const (
	// ReadyCompletedMessage goes with Ready=True.
	ReadyCompletedMessage = "the stack has been processed and is up to date"
	// NotReadyInProgressMessage goes with Ready=False while Reconciling=True.
	NotReadyInProgressMessage = "reconciliation is in progress"
	// NotReadyStalledMessage goes with Ready=False while Stalled=True.
	NotReadyStalledMessage = "reconciliation is stalled"
)

// Reasons of the Reconciling condition.
const (
	// ReconcilingProcessingReason says an update is being prepared or is
	// running.
	ReconcilingProcessingReason = "StackProcessing"
	// ReconcilingRetryReason says the last update failed and will be retried
	// after a backoff.
	ReconcilingRetryReason = "RetryingAfterFailure"
	// ReconcilingPrerequisiteNotSatisfiedReason says a prerequisite stack has
	// not succeeded (recently enough) yet.
	ReconcilingPrerequisiteNotSatisfiedReason = "PrerequisiteNotSatisfied"
	// ReconcilingExpiredReason says the Stack's spec.ttl has run out: the
	// operator deletes the Stack, destroying its resources first. A
	// stackyard extension.
	ReconcilingExpiredReason = "Expired"
)

// Messages of the Reconciling condition for the ReconcilingProcessingReason.
const (
	// ReconcilingProcessingWorkspaceMessage says the operator is waiting for
	// the workspace.
	ReconcilingProcessingWorkspaceMessage = "waiting for workspace readiness"
	// ReconcilingProcessingUpdateMessage says an update is running.
	ReconcilingProcessingUpdateMessage = "stack is being processed"
)

// Reasons of the Stalled condition.
const (
	// StalledSpecInvalidReason says the spec cannot be acted on as written.
	StalledSpecInvalidReason = "SpecInvalid"
	// StalledSourceUnavailableReason says the program source cannot be fetched
	// (bad address, missing credentials, missing Program, ...).
	StalledSourceUnavailableReason = "SourceUnavailable"
	// StalledConflictReason says another update of the same stack was running
	// and retryOnUpdateConflict is off.
	StalledConflictReason = "UpdateConflict"
	// StalledPulumiVersionTooLowReason says the Pulumi CLI in the workspace
	// image is too old for a feature the spec asks for.
	StalledPulumiVersionTooLowReason = "PulumiVersionTooLow"
	// StalledPulumiVersionUnsupportedReason says the Pulumi CLI in the
	// workspace image is of a major version the agent does not drive.
	StalledPulumiVersionUnsupportedReason = "PulumiVersionUnsupported"
	// StalledWorkspaceFailedReason says the workspace could not be set up, e.g.
	// installing the program's dependencies failed.
	StalledWorkspaceFailedReason = "WorkspaceFailed"
	// StalledPromotionEndedReason says the Stack is held to the plan of a
	// promotion that has ended without it: the plan runs only within its
	// promotion, so the Stack waits for a new one.
	StalledPromotionEndedReason = "PromotionEnded"
	// StalledInputsChangedReason says what the Stack reads (its spec, a
	// Secret or ConfigMap it names, or the plan it is held to) changed
	// since the promotion that pinned it previewed it, so its up would run
	// what nobody approved.
	StalledInputsChangedReason = "InputsChanged"
	// StalledNameTakenReason says a Workspace or an Update the Stack did
	// not make holds the name of the Stack's Workspace or of its next
	// Update: the Stack does not take it for its own, and waits for it to
	// be deleted.
	StalledNameTakenReason = "NameTaken"
	// StalledUnapprovedReason says a Stack that a stage governs would apply
	// again what it deployed (a resync, a drift remediation, a reconcile
	// request) while what it reads is not what the promotion that pinned
	// it approved, or no promotion pinned it: it waits for a promotion.
	StalledUnapprovedReason = "Unapproved"
)

// Reasons that may go with more than one condition, depending on whether the
// operator will retry (Reconciling) or not (Stalled).
const (
	// UpdateFailedReason says the last update (pulumi up or destroy) failed.
	UpdateFailedReason = "UpdateFailed"
	// PreviewFailedReason says the last preview (spec.preview) failed.
	PreviewFailedReason = "PreviewFailed"
	// NamespaceTerminatingReason says the Stack's namespace is being deleted, so
	// no workspace or update can be created in it any more.
	NamespaceTerminatingReason = "NamespaceTerminating"
)

// Reasons of a step of the operator's that failed, stackyard's own (the
// upstream operator leaves such failures in its log and the Stack "in
// progress"). Reconciling=True carries one of them, with the error, while
// the step is retried; Stalled=True carries it once the same failure has
// lasted longer than the operator's stall bound (--stall-after, 5 minutes by
// default) or cannot pass by retrying (the API server rejected the object
// built from the spec). A stall of this kind is still retried, every stall
// bound, and lifts by itself once the cause is gone.
const (
	// FinalizerFailedReason: the finalizer could not be added or removed.
	FinalizerFailedReason = "FinalizerFailed"
	// WorkspaceApplyFailedReason: the Workspace built from the spec could
	// not be applied.
	WorkspaceApplyFailedReason = "WorkspaceApplyFailed"
	// WorkspaceDeleteFailedReason: the Workspace could not be deleted.
	WorkspaceDeleteFailedReason = "WorkspaceDeleteFailed"
	// UpdateCreateFailedReason: an Update could not be created.
	UpdateCreateFailedReason = "UpdateCreateFailed"
	// UpdateReadFailedReason: the current Update could not be read.
	UpdateReadFailedReason = "UpdateReadFailed"
	// UpdateDeleteFailedReason: an Update that cannot run could not be
	// deleted.
	UpdateDeleteFailedReason = "UpdateDeleteFailed"
	// OutputsReadFailedReason: a finished Update's outputs could not be read.
	OutputsReadFailedReason = "OutputsReadFailed"
	// SecretReadFailedReason: a Secret or ConfigMap the spec names could not
	// be read (other than not existing).
	SecretReadFailedReason = "SecretReadFailed"
	// ReferenceNotFoundReason: a Secret, ConfigMap or key the spec names
	// does not exist; the message names the field.
	ReferenceNotFoundReason = "ReferenceNotFound"
	// StackDeleteFailedReason: a Stack whose spec.ttl ran out could not be
	// deleted.
	StackDeleteFailedReason = "StackDeleteFailed"
	// PrerequisiteReadFailedReason: a prerequisite Stack could not be read.
	PrerequisiteReadFailedReason = "PrerequisiteReadFailed"
	// ApprovalReadFailedReason says deciding whether a governed Stack's
	// spec is approved failed: the promotion that pinned it, or a Secret
	// or ConfigMap it names, could not be read.
	ApprovalReadFailedReason = "ApprovalReadFailed"
)
