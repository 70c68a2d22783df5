package stack

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/stackrun"
)

// secretOutputValue replaces a secret output's value in the Stack's status,
// as upstream shows it.
var secretOutputValue = apiextensionsv1.JSON{Raw: []byte(`"[secret]"`)}

// observeUpdate follows the Stack's current Update. While it runs the chain
// stops there, waiting; when it has finished, its result becomes lastUpdate,
// outputs and history (or lastDriftCheck) and currentUpdate is cleared. A
// currentUpdate whose Update is gone is cleared too, so it can never point at
// nothing for long (upstream #1292). An Update that never started and whose
// Workspace cannot run it is left to reconcileCleanup. The step only reads
// and records: deleting objects is reconcileCleanup's.
func (s *session) observeUpdate(ctx context.Context) (sreconcile.Result, error) {
	cur := s.stack.Status.CurrentUpdate
	if cur == nil {
		return sreconcile.ResultEmpty, nil
	}
	var upd autov1alpha1.Update
	found, err := s.readUpdate(ctx, cur.Name, &upd)
	if err != nil {
		return sreconcile.ResultEmpty, failed(pulumiv1.UpdateReadFailedReason, "reading update "+cur.Name, err)
	}
	if !found {
		s.warn("UpdateLost", fmt.Sprintf("update %s disappeared before it finished; starting over", cur.Name))
		s.stack.Status.CurrentUpdate = nil
		return sreconcile.ResultEmpty, nil
	}
	if cur.UID != "" && upd.UID != cur.UID {
		// The Update the Stack made was deleted and another made under its
		// name: what that one says is no record of the Stack's (and the
		// choke point refuses to run it).
		s.warn("UpdateReplaced", fmt.Sprintf("update %s was deleted before it finished and another made in its place (UID %s, not %s); starting over",
			cur.Name, upd.UID, cur.UID))
		s.stack.Status.CurrentUpdate = nil
		return sreconcile.ResultEmpty, nil
	}
	done, failedUpd, reason := updateDone(&upd)
	if !done && updatePending(&upd) {
		if drop, err := s.unproven(ctx, cur); drop || err != nil {
			// reconcileCleanup deletes it; the chain makes the
			// Workspace and the Update anew.
			s.abandoned = &upd
			return sreconcile.ResultEmpty, err
		}
	}
	if !done && !s.r.Shard.Owns(&upd) {
		if updatePending(&upd) && s.workspaceHere(ctx) {
			return sreconcile.ResultEmpty, s.takeOver(ctx, &upd)
		}
		return sreconcile.ResultEmpty, s.elsewhere(&upd)
	}
	if !done {
		if updatePending(&upd) && s.workspaceStall(ctx) != nil {
			// The Update never started and its Workspace cannot run it
			// until its spec changes: cleanup drops it, so the chain goes
			// on to apply a fixed spec, and reconcileUpdate reports the
			// stall.
			s.abandoned = &upd
			return sreconcile.ResultEmpty, nil
		}
		if isDriftCheck(&upd) {
			return sreconcile.ResultEmpty, s.driftCheckRunning()
		}
		return sreconcile.ResultEmpty, s.running(ctx, &upd)
	}
	if isDriftCheck(&upd) {
		s.recordDriftCheck(&upd, failedUpd)
	} else if err := s.recordUpdate(ctx, &upd, failedUpd, reason); err != nil {
		return sreconcile.ResultEmpty, err
	}
	s.stack.Status.CurrentUpdate = nil
	return sreconcile.ResultEmpty, nil
}

// unproven decides, for the current Update, which has not started, what
// the choke point needs to run it and only the Stack can give: a record
// of the Update with its UID, and of the Workspace it runs in. A record
// from before stackyard recorded UIDs proves nothing, so the Update is
// dropped (drop), and made again. A Workspace the Stack has no record of
// is decided on now (ownWorkspace), since the steps that would decide it
// do not run while the Update waits: one the Stack deletes takes the
// Update with it (drop); one that is someone else's stalls the Stack
// (err).
func (s *session) unproven(ctx context.Context, cur *shared.CurrentStackUpdate) (drop bool, err error) {
	if cur.UID == "" {
		s.warn("UpdateUnproven", fmt.Sprintf("update %s was recorded without its UID, which proves nothing: it is dropped, before it started, and made again", cur.Name))
		return true, nil
	}
	var ws autov1alpha1.Workspace
	if err := s.r.Client.Get(ctx, client.ObjectKey{Namespace: s.stack.Namespace, Name: stackrun.WorkspaceName(s.stack)}, &ws); err != nil || !ws.DeletionTimestamp.IsZero() {
		return false, nil
	}
	if rec := s.stack.Status.Workspace; rec != nil && rec.UID == ws.UID {
		return false, nil
	}
	deleted, err := s.ownWorkspace(ctx, &ws)
	if deleted {
		return true, nil
	}
	return false, err
}

// running is the wait while the Stack's Update runs: upstream's message,
// or what keeps a pending Update from starting. While the Workspace is not
// Ready that is what the Workspace says (queued for an agent, a failure
// setting the stack up such as a full disk), and the Update's message,
// which only says it waits for the Workspace, is left out; once it is
// Ready, what the Update's status says (its agent starting, another Update
// of the Workspace), unless that is still the wait for readiness, which the
// Update is about to leave. The message thus changes only when the
// situation does: each change is a write of the Stack's status, several
// per update of every Stack of a burst.
func (s *session) running(ctx context.Context, upd *autov1alpha1.Update) error {
	msg := pulumiv1.ReconcilingProcessingUpdateMessage
	ready, why := workspaceReady(ctx, s.r.Client, s.stack)
	if !ready {
		msg = pulumiv1.ReconcilingProcessingWorkspaceMessage
	}
	if c := apimeta.FindStatusCondition(upd.Status.Conditions, autov1alpha1.UpdateConditionTypeProgressing); updatePending(upd) {
		switch {
		case why != "":
			msg += ": " + why
		case ready && c != nil && c.Message != "" && c.Reason != autov1alpha1.UpdateReasonWaitingForWorkspace:
			msg += ": " + c.Message
		}
	}
	return sreconcile.NewWaiting(pulumiv1.ReconcilingProcessingReason, errors.New(msg), ResyncInterval(&s.stack.Spec, s.r.MinResync))
}

// recordUpdate writes a finished Update's result into the Stack's status.
func (s *session) recordUpdate(ctx context.Context, upd *autov1alpha1.Update, failed bool, reason string) error {
	st := &s.stack.Status
	cur := st.CurrentUpdate
	prev := st.LastUpdate
	last := &shared.StackUpdateState{
		Generation:          cur.Generation,
		ReconcileRequest:    cur.ReconcileRequest,
		Name:                upd.Name,
		Type:                upd.Spec.Type,
		Message:             upd.Status.Message,
		LastAttemptedCommit: cur.Commit,
		Permalink:           shared.Permalink(upd.Status.Permalink),
		LastResyncTime:      metav1.NewTime(s.now),
	}
	if prev != nil {
		last.LastSuccessfulCommit = prev.LastSuccessfulCommit
	}
	if failed {
		last.State = shared.FailedStackStateMessage
		last.Failures = 1
		if prev != nil && prev.State == shared.FailedStackStateMessage && sameAttempt(prev, last) {
			last.Failures = prev.Failures + 1
		}
		if s.stack.FailureNotCounted(reason) {
			// An interruption (operator restart, lost agent), or a
			// conflict the spec says to retry, is not the program's fault:
			// it adds nothing to the failures in a row, also when it is
			// the first attempt, so it never brings the stall closer.
			last.Failures = 0
			if prev != nil && prev.State == shared.FailedStackStateMessage && sameAttempt(prev, last) {
				last.Failures = prev.Failures
			}
		}
		s.warn(cmp.Or(reason, pulumiv1.UpdateFailedReason), fmt.Sprintf("%s %s failed: %s", upd.Spec.Type, upd.Name, upd.Status.Message))
	} else {
		last.State = shared.SucceededStackStateMessage
		last.LastSuccessfulCommit = cur.Commit
		s.event(corev1.EventTypeNormal, "UpdateSucceeded", fmt.Sprintf("%s %s succeeded on revision %s", upd.Spec.Type, upd.Name, cur.Commit))
		s.clearDriftAfterUpdate(upd)
		if err := s.readOutputs(ctx, upd); err != nil {
			return err
		}
		if pi := upd.Status.ProjectInfo; pi != nil {
			st.ProjectInfo = &shared.ProjectInfo{Name: pi.Name, Runtime: pi.Runtime}
		}
	}
	st.LastUpdate = last
	s.appendHistory(upd, last, reason)
	return nil
}

// sameAttempt reports whether two updates ran for the same generation,
// request and revision, i.e. whether a failure repeats an earlier one.
func sameAttempt(a, b *shared.StackUpdateState) bool {
	return a.Generation == b.Generation && a.ReconcileRequest == b.ReconcileRequest && a.LastAttemptedCommit == b.LastAttemptedCommit
}

// appendHistory records the finished Update at the front of status.history,
// keeping at most pulumiv1.MaxHistory entries.
func (s *session) appendHistory(upd *autov1alpha1.Update, last *shared.StackUpdateState, reason string) {
	rec := shared.UpdateRecord{
		Name:             upd.Name,
		Type:             upd.Spec.Type,
		State:            last.State,
		Reason:           reason,
		Generation:       last.Generation,
		ReconcileRequest: last.ReconcileRequest,
		Commit:           last.LastAttemptedCommit,
		Trigger:          upd.Annotations[stackrun.TriggerAnnotation],
		StartTime:        upd.Status.StartTime,
		EndTime:          upd.Status.EndTime,
		Changes:          upd.Status.Changes,
		Message:          upd.Status.Message,
		Permalink:        last.Permalink,
	}
	h := append([]shared.UpdateRecord{rec}, s.stack.Status.History...)
	if len(h) > pulumiv1.MaxHistory {
		h = h[:pulumiv1.MaxHistory]
	}
	s.stack.Status.History = h
}

// readOutputs copies a successful Update's outputs into the Stack's status,
// each secret one shown as "[secret]" (its value stays in the Update's
// Secret, never in the Stack).
func (s *session) readOutputs(ctx context.Context, upd *autov1alpha1.Update) error {
	if upd.Status.Outputs == "" {
		s.stack.Status.Outputs = nil
		return nil
	}
	var secret corev1.Secret
	if err := s.r.Client.Get(ctx, client.ObjectKey{Namespace: upd.Namespace, Name: upd.Status.Outputs}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // already garbage-collected with its Update: keep what status has
		}
		return failed(pulumiv1.OutputsReadFailedReason, "reading the outputs of "+upd.Name, err)
	}
	secretKeys := map[string]bool{}
	if list := secret.Annotations[autov1alpha1.SecretOutputsAnnotation]; list != "" {
		var keys []string
		if err := json.Unmarshal([]byte(list), &keys); err == nil {
			for _, k := range keys {
				secretKeys[k] = true
			}
		}
	}
	outputs := shared.StackOutputs{}
	for key, value := range secret.Data {
		if secretKeys[key] {
			outputs[key] = secretOutputValue
			continue
		}
		if !json.Valid(value) {
			raw, _ := json.Marshal(string(value))
			value = raw
		}
		outputs[key] = apiextensionsv1.JSON{Raw: value}
	}
	s.stack.Status.Outputs = outputs
	return nil
}

// workspaceStall returns the Stack's stall when its Workspace is stalled at
// its current generation: it cannot run anything until its spec (that is,
// the Stack's) changes. The reason is WorkspaceFailed, or upstream's
// PulumiVersionTooLow when the workspace image's CLI is too old, or
// PulumiVersionUnsupported when it is too new.
func (s *session) workspaceStall(ctx context.Context) error {
	var ws autov1alpha1.Workspace
	if err := s.r.Client.Get(ctx, client.ObjectKey{Namespace: s.stack.Namespace, Name: stackrun.WorkspaceName(s.stack)}, &ws); err != nil {
		return nil
	}
	c := apimeta.FindStatusCondition(ws.Status.Conditions, autov1alpha1.WorkspaceStalled)
	if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != ws.Generation {
		return nil
	}
	reason := pulumiv1.StalledWorkspaceFailedReason
	switch c.Reason {
	case autov1alpha1.WorkspaceReasonPulumiVersionTooLow:
		reason = pulumiv1.StalledPulumiVersionTooLowReason
	case autov1alpha1.WorkspaceReasonPulumiVersionUnsupported:
		reason = pulumiv1.StalledPulumiVersionUnsupportedReason
	}
	return sreconcile.NewStalling(reason, fmt.Errorf("the workspace cannot run the stack until the spec is fixed: %s", stackMessage(&s.stack.Spec, c.Message)))
}

// updatePending reports whether an Update has not started its operation.
func updatePending(upd *autov1alpha1.Update) bool {
	return upd.Status.NotStarted()
}

// workspaceReady reports whether the Stack's Workspace says it can serve
// and, when it cannot, what its Reconciling condition says it is doing or
// failing at for its current generation ("" when it says nothing).
func workspaceReady(ctx context.Context, c client.Reader, stack *pulumiv1.Stack) (bool, string) {
	var ws autov1alpha1.Workspace
	if err := c.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: stackrun.WorkspaceName(stack)}, &ws); err != nil {
		return false, ""
	}
	if sreconcile.IsReady(ws.Status.Conditions) && ws.Status.ObservedGeneration == ws.Generation {
		return true, ""
	}
	r := apimeta.FindStatusCondition(ws.Status.Conditions, sreconcile.ReconcilingCondition)
	if r == nil || r.Status != metav1.ConditionTrue || r.ObservedGeneration != ws.Generation || r.Message == "" {
		return false, ""
	}
	return false, fmt.Sprintf("workspace %s: %s: %s", ws.Name, r.Reason, r.Message)
}
