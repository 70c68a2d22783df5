package workspace

import (
	"cmp"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/reconcile"
)

// Reasons of the Active condition.
const (
	// ReasonRunning: the agent runs and is set up.
	ReasonRunning = "Running"
	// ReasonStarting: the agent is starting or being set up.
	ReasonStarting = "Starting"
	// ReasonIdle: the agent was stopped until an Update needs it.
	ReasonIdle = "Idle"
)

// ReasonUpdateInProgress is the Reconciling reason while a new generation
// waits for a running Update to finish.
const ReasonUpdateInProgress = "UpdateInProgress"

// trueAt reports whether condition t of ws is True for its current
// generation.
func trueAt(ws *autov1alpha1.Workspace, t string) bool {
	c := apimeta.FindStatusCondition(ws.Status.Conditions, t)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == ws.Generation
}

// setCondition writes one condition for ws's current generation.
func setCondition(ws *autov1alpha1.Workspace, t string, status metav1.ConditionStatus, reason, msg string) {
	apimeta.SetStatusCondition(&ws.Status.Conditions, metav1.Condition{
		Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: ws.Generation,
	})
}

// markReady records that the current generation is set up.
func markReady(ws *autov1alpha1.Workspace, msg string) {
	setCondition(ws, autov1alpha1.WorkspaceReady, metav1.ConditionTrue, autov1alpha1.WorkspaceReasonSucceeded, msg)
	apimeta.RemoveStatusCondition(&ws.Status.Conditions, reconcile.StalledCondition)
	apimeta.RemoveStatusCondition(&ws.Status.Conditions, reconcile.ReconcilingCondition)
	ws.Status.ObservedGeneration = ws.Generation
}

// markPending records work in progress: Reconciling=True with reason and
// msg. Ready stays True when the current generation was set up already (an
// agent restarting, a transient failure while setting it up again); it is
// False with reason Pending otherwise. Reconciling's lastTransitionTime
// restarts when its reason changes, so that it says how long the current
// failure has lasted (reconcile.Escalate reads it).
func markPending(ws *autov1alpha1.Workspace, reason, msg string) {
	reason = cmp.Or(reason, autov1alpha1.WorkspaceReasonPending)
	apimeta.RemoveStatusCondition(&ws.Status.Conditions, reconcile.StalledCondition)
	if c := apimeta.FindStatusCondition(ws.Status.Conditions, reconcile.ReconcilingCondition); c != nil && c.Reason != reason {
		apimeta.RemoveStatusCondition(&ws.Status.Conditions, reconcile.ReconcilingCondition)
	}
	setCondition(ws, reconcile.ReconcilingCondition, metav1.ConditionTrue, reason, msg)
	if !trueAt(ws, autov1alpha1.WorkspaceReady) {
		setCondition(ws, autov1alpha1.WorkspaceReady, metav1.ConditionFalse, autov1alpha1.WorkspaceReasonPending, msg)
	}
}

// markStalled records a failure a retry cannot fix.
func markStalled(ws *autov1alpha1.Workspace, reason, msg string) {
	reason = cmp.Or(reason, reconcile.StalledSpecInvalidReason)
	apimeta.RemoveStatusCondition(&ws.Status.Conditions, reconcile.ReconcilingCondition)
	setCondition(ws, reconcile.StalledCondition, metav1.ConditionTrue, reason, msg)
	setCondition(ws, autov1alpha1.WorkspaceReady, metav1.ConditionFalse, reason, msg)
	ws.Status.ObservedGeneration = ws.Generation
}

// stalledAt reports whether ws stalled at its current generation.
func stalledAt(ws *autov1alpha1.Workspace) bool {
	return trueAt(ws, reconcile.StalledCondition)
}

// setActive writes the Active condition.
func setActive(ws *autov1alpha1.Workspace, active bool, reason, msg string) {
	status := metav1.ConditionFalse
	if active {
		status = metav1.ConditionTrue
	}
	setCondition(ws, autov1alpha1.WorkspaceActive, status, reason, msg)
}
