package v1alpha1

// The vocabulary of change management's events, stated once: the reasons
// of the Kubernetes Events the Pipeline and Promotion controllers record,
// the kinds of the audit trail (`stackyard history`, the dashboard's
// history), and, as notification.stackyard.dev EventTypes, the events an
// Alert sends. A name means the same thing wherever it appears.
const (
	// EventReleaseDiscovered: a Pipeline recorded a new Release.
	EventReleaseDiscovered = "ReleaseDiscovered"
	// EventReleasesPruned: a Pipeline deleted the Releases beyond
	// spec.releaseRetention.
	EventReleasesPruned = "ReleasesPruned"
	// EventPromotionRequested: a person or auto-promotion asked for a
	// promotion (or a rollback).
	EventPromotionRequested = "PromotionRequested"
	// EventPolicyFired: a policy rule of the stage fired on the
	// promotion's previews.
	EventPolicyFired = "PolicyFired"
	// EventPromotionAwaitingApproval: a promotion waits for approvals
	// (Promotion.AwaitsApproval).
	EventPromotionAwaitingApproval = "PromotionAwaitingApproval"
	// EventApprovalGiven: a person approved a promotion.
	EventApprovalGiven = "ApprovalGiven"
	// EventApprovalRejected: a person rejected a promotion.
	EventApprovalRejected = "ApprovalRejected"
	// EventPromotionStarted: the promotion recorded the Stacks' commits
	// and pins them.
	EventPromotionStarted = "PromotionStarted"
	// EventPromotionSucceeded: every Stack of the stage is Ready at the
	// release's commit.
	EventPromotionSucceeded = "PromotionSucceeded"
	// EventPromotionFailed: a Stack failed, or could not be pinned.
	EventPromotionFailed = "PromotionFailed"
	// EventPromotionAborted: refused or superseded before it started,
	// or aborted by an Intervention while it ran.
	EventPromotionAborted = "PromotionAborted"
	// EventWaveStarted: a promotion's rollout began its next wave.
	EventWaveStarted = "WaveStarted"
	// EventRolloutHalted: a promotion's rollout halted: its failure
	// budget was spent, or someone halted it (an Intervention).
	EventRolloutHalted = "RolloutHalted"
	// EventRolloutResumed: someone resumed a halted rollout.
	EventRolloutResumed = "RolloutResumed"
	// EventRolloutAborted: someone aborted a promotion that runs (an
	// Intervention); PromotionFinished follows once nothing updates.
	EventRolloutAborted = "RolloutAborted"
	// EventPromotionFinished: the promotion ended, whichever way (the
	// audit trail's kind; its phase says how).
	EventPromotionFinished = "PromotionFinished"
	// EventVerificationSucceeded: every verification check of the stage
	// passed.
	EventVerificationSucceeded = "VerificationSucceeded"
	// EventVerificationFailed: a verification check failed.
	EventVerificationFailed = "VerificationFailed"
	// EventRollbackRequested: a failed verification asked for the
	// rollback of the stage.
	EventRollbackRequested = "RollbackRequested"
	// EventRolledBack: a rollback promotion succeeded.
	EventRolledBack = "RolledBack"
	// EventStackStalled: a Stack became Stalled (kstatus): only a human
	// can make it progress.
	EventStackStalled = "StackStalled"
	// EventDriftDetected: a Stack's drift check found drift
	// (status.lastDriftCheck.drifted).
	EventDriftDetected = "DriftDetected"
)
