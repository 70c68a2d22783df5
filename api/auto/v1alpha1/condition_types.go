package v1alpha1

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of a Workspace.
const (
	// WorkspaceReady is True when the workspace's agent is serving and its
	// stacks are selected and configured, so Updates can run.
	WorkspaceReady = "Ready"
	// WorkspaceStalled is True when setting the workspace up failed in a
	// way that retrying will not fix (e.g. `pulumi install` failed); the
	// spec or the program must change first.
	WorkspaceStalled = "Stalled"
	// WorkspaceActive is True while the workspace's agent serves right
	// now; it goes False while the agent starts, is set up, or idles.
	WorkspaceActive = "Active"
)

// Reasons of Workspace conditions.
const (
	// WorkspaceReasonPending says the workspace pod is not serving yet.
	WorkspaceReasonPending = "Pending"
	// WorkspaceReasonSucceeded says the workspace is set up and serving.
	WorkspaceReasonSucceeded = "Succeeded"
	// WorkspaceReasonSourceFailed says the program could not be fetched.
	WorkspaceReasonSourceFailed = "SourceFailed"
	// WorkspaceReasonInstallFailed says installing the program's
	// dependencies failed.
	WorkspaceReasonInstallFailed = "InstallFailed"
	// WorkspaceReasonStackSetupFailed says selecting, creating or
	// configuring one of the stacks failed.
	WorkspaceReasonStackSetupFailed = "StackSetupFailed"
	// WorkspaceReasonPulumiVersionTooLow says the workspace's Pulumi CLI
	// is older than the agent needs (see the Workspace's spec.image).
	WorkspaceReasonPulumiVersionTooLow = "PulumiVersionTooLow"
	// WorkspaceReasonPulumiVersionUnsupported says the workspace's Pulumi
	// CLI is of a major version the agent does not drive (see spec.image).
	WorkspaceReasonPulumiVersionUnsupported = "PulumiVersionUnsupported"
)

// Condition types of an Update. Like a Job, a finished Update has
// Complete=True, and Failed tells whether the operation failed.
const (
	// UpdateConditionTypeProgressing is True while the operation runs.
	UpdateConditionTypeProgressing = "Progressing"
	// UpdateConditionTypeComplete is True once the operation has finished,
	// successfully or not.
	UpdateConditionTypeComplete = "Complete"
	// UpdateConditionTypeFailed is True when the operation finished with an
	// error.
	UpdateConditionTypeFailed = "Failed"
)

// Reasons of Update conditions.
const (
	// UpdateReasonPending says the operation has not started, e.g. because
	// the workspace is not ready.
	UpdateReasonPending = "Pending"
	// UpdateReasonWaitingForWorkspace says the operation has not started
	// because its workspace is not Ready for its current generation. The
	// workspace's own conditions say why.
	UpdateReasonWaitingForWorkspace = "WaitingForWorkspace"
	// UpdateReasonInProgress says the operation is running.
	UpdateReasonInProgress = "InProgress"
	// UpdateReasonSucceeded says the operation finished without error.
	UpdateReasonSucceeded = "Succeeded"
	// UpdateReasonFailed says the operation finished with an error.
	UpdateReasonFailed = "UpdateFailed"
	// UpdateReasonConflict says the operation could not start because
	// another operation holds the stack's lock (HTTP 409 from the backend).
	UpdateReasonConflict = "UpdateConflict"
	// UpdateReasonInterrupted says the operator stopped (restart, crash)
	// while the operation ran; its owner retries it.
	UpdateReasonInterrupted = "Interrupted"
	// UpdateReasonCancelled says the Update was deleted while it ran, which
	// cancelled the operation.
	UpdateReasonCancelled = "Cancelled"
)

// NotStarted reports whether the Update's operation has not started: it
// has no Progressing condition yet, or that condition's reason is Pending
// or WaitingForWorkspace. A complete Update has started, or ended without.
func (s *UpdateStatus) NotStarted() bool {
	c := apimeta.FindStatusCondition(s.Conditions, UpdateConditionTypeProgressing)
	return c == nil || c.Reason == UpdateReasonPending || c.Reason == UpdateReasonWaitingForWorkspace
}

// IsReady reports whether the workspace's Ready condition is True.
func (s *WorkspaceStatus) IsReady() bool {
	return apimeta.IsStatusConditionTrue(s.Conditions, WorkspaceReady)
}

// IsStalled reports whether the workspace's Stalled condition is True.
func (s *WorkspaceStatus) IsStalled() bool {
	return apimeta.IsStatusConditionTrue(s.Conditions, WorkspaceStalled)
}

// StalledNow returns ws's Stalled condition when it is True for ws's
// current generation, nil otherwise (also for a nil Workspace).
func (ws *Workspace) StalledNow() *metav1.Condition {
	if ws == nil {
		return nil
	}
	c := apimeta.FindStatusCondition(ws.Status.Conditions, WorkspaceStalled)
	if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != ws.Generation {
		return nil
	}
	return c
}

// Serving reports whether ws's agent can take calls now: Ready and Active
// are True for ws's current generation and ws is not being deleted. The
// Update controller waits for it before it dials the agent.
func (ws *Workspace) Serving() bool {
	return ws.DeletionTimestamp.IsZero() && trueAt(ws, WorkspaceReady) && trueAt(ws, WorkspaceActive)
}

// trueAt reports whether condition t of ws is True for its current
// generation.
func trueAt(ws *Workspace, t string) bool {
	c := apimeta.FindStatusCondition(ws.Status.Conditions, t)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == ws.Generation
}

// IsComplete reports whether the operation has finished, whatever its
// outcome.
func (s *UpdateStatus) IsComplete() bool {
	return apimeta.IsStatusConditionTrue(s.Conditions, UpdateConditionTypeComplete)
}

// IsFailed reports whether the operation finished with an error.
func (s *UpdateStatus) IsFailed() bool {
	return apimeta.IsStatusConditionTrue(s.Conditions, UpdateConditionTypeFailed)
}

// MarkProgressing records that the operation is pending or running:
// Progressing=True, and Complete and Failed False with the same reason.
func (s *UpdateStatus) MarkProgressing(reason, message string) {
	s.setConditions(metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionFalse, reason, message)
}

// MarkSucceeded records that the operation finished without error:
// Progressing=False, Complete=True, Failed=False.
func (s *UpdateStatus) MarkSucceeded(message string) {
	s.setConditions(metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse, UpdateReasonSucceeded, message)
}

// MarkFailed records that the operation finished with an error:
// Progressing=False, Complete=True, Failed=True, all with the given reason.
func (s *UpdateStatus) MarkFailed(reason, message string) {
	s.setConditions(metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionTrue, reason, message)
}

func (s *UpdateStatus) setConditions(progressing, complete, failed metav1.ConditionStatus, reason, message string) {
	for _, c := range []struct {
		t      string
		status metav1.ConditionStatus
	}{
		{UpdateConditionTypeProgressing, progressing},
		{UpdateConditionTypeComplete, complete},
		{UpdateConditionTypeFailed, failed},
	} {
		apimeta.SetStatusCondition(&s.Conditions, metav1.Condition{
			Type:    c.t,
			Status:  c.status,
			Reason:  reason,
			Message: message,
		})
	}
}
