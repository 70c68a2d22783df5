package stack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// reconcileWorkspace keeps the Workspace the Stack needs. With
// workspaceReclaimPolicy Delete the Workspace exists only while an update
// runs, so it is applied when one starts instead.
func (s *session) reconcileWorkspace(ctx context.Context) (bool, error) {
	if reclaimWorkspace(s.stack) {
		return false, nil
	}
	return false, s.applyWorkspace(ctx)
}

// applyWorkspace applies the Workspace (server-side apply, so fields others
// own are left alone), owned by the Stack.
func (s *session) applyWorkspace(ctx context.Context) error {
	ws, err := BuildWorkspace(s.stack, s.src)
	if err != nil {
		return err
	}
	if err := controllerutil.SetControllerReference(s.stack, ws, s.r.Scheme); err != nil {
		return err
	}
	ws.ManagedFields = nil
	return terminatingOr(s.r.Client.Patch(ctx, ws, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership))
}

// reclaimWorkspace reports whether the Stack's Workspace is deleted once
// the Stack is synced (workspaceReclaimPolicy Delete).
func reclaimWorkspace(stack *pulumiv1.Stack) bool {
	return stack.Spec.WorkspaceReclaimPolicy == shared.WorkspaceReclaimDelete
}

// deleteWorkspace removes the Stack's Workspace (its agent and state go
// with it); a later update makes a new one.
func (s *session) deleteWorkspace(ctx context.Context) error {
	ws := &autov1alpha1.Workspace{}
	ws.Name, ws.Namespace = WorkspaceName(s.stack), s.stack.Namespace
	return client.IgnoreNotFound(s.r.Client.Delete(ctx, ws))
}

// reconcileUpdate starts an update when one is due: it checks the
// prerequisites, then creates the Update and records it as currentUpdate.
// The Update's name is derived from what it is for, so a reconcile killed
// between creating it and recording it finds the same Update next time.
func (s *session) reconcileUpdate(ctx context.Context) (bool, error) {
	stack := s.stack
	s.decision = Decide(&stack.Spec, stack.Status.LastUpdate, s.observed())
	if !s.decision.Due || (conflictStalled(stack) && s.decision.Trigger == TriggerRetry) {
		return true, s.reconcileDriftCheck(ctx)
	}
	if err := s.checkPrerequisites(ctx); err != nil {
		return true, err
	}
	if err := s.workspaceStall(ctx); err != nil {
		return true, err
	}
	if reclaimWorkspace(stack) {
		if err := s.applyWorkspace(ctx); err != nil {
			return true, err
		}
	}
	upd := BuildUpdate(stack, s.src.Revision, s.updateType(), string(s.decision.Trigger))
	if err := controllerutil.SetControllerReference(stack, upd, s.r.Scheme); err != nil {
		return true, err
	}
	if err := s.r.Client.Create(ctx, upd); err != nil && !apierrors.IsAlreadyExists(err) {
		if apierrors.IsForbidden(err) && isNamespaceTerminating(err) {
			return true, namespaceTerminating(err)
		}
		return true, err
	}
	stack.Status.CurrentUpdate = &shared.CurrentStackUpdate{
		Generation:       stack.Generation,
		ReconcileRequest: reconcileRequest(stack),
		Name:             upd.Name,
		Commit:           s.src.Revision,
	}
	s.inProgress = pulumiv1.ReconcilingProcessingUpdateMessage
	s.event("Normal", "UpdateStarted", fmt.Sprintf("started %s %s (%s) on revision %s", upd.Spec.Type, upd.Name, s.decision.Trigger, s.src.Revision))
	return true, nil
}

// updateType is what a due update runs: a preview for preview stacks, an
// up otherwise.
func (s *session) updateType() autov1alpha1.UpdateType {
	if s.stack.Spec.Preview {
		return autov1alpha1.PreviewType
	}
	return autov1alpha1.UpType
}

func (s *session) observed() Observed {
	return Observed{
		Generation:       s.stack.Generation,
		ReconcileRequest: reconcileRequest(s.stack),
		Revision:         s.src.Revision,
		Now:              s.now,
		MinResync:        s.r.MinResync,
		Drifted:          driftToRemediate(s.stack),
	}
}

// reconcileRequest is the value of the Stack's reconciliation-request
// annotation.
func reconcileRequest(stack *pulumiv1.Stack) string {
	return stack.Annotations[shared.ReconcileRequestAnnotation]
}

// BuildUpdate returns the Update that runs typ for the Stack at revision,
// with the Stack's updateTemplate merged in. Its name is a digest of what it
// is for (generation, reconcile request, revision, attempt, type, the last
// finished Update), so that it is stable across reconciles.
func BuildUpdate(stack *pulumiv1.Stack, revision string, typ autov1alpha1.UpdateType, trigger string) *autov1alpha1.Update {
	spec := &stack.Spec
	var failures int64
	var lastName string
	if last := stack.Status.LastUpdate; last != nil {
		// The last finished Update is part of the key: a retry whose
		// inputs and failure count are unchanged (an interruption does not
		// count) must be a new Update, not the finished one found again,
		// which would be recorded again and never run.
		failures, lastName = last.Failures, last.Name
	}
	key := fmt.Sprintf("%d\x00%s\x00%s\x00%d\x00%s\x00%s", stack.Generation, reconcileRequest(stack), revision, failures, typ, lastName)
	switch last := stack.Status.LastUpdate; {
	case (trigger == string(TriggerResync) || trigger == string(TriggerDrift)) && last != nil:
		// Resyncs and remediations of the same revision are distinct
		// updates.
		key += "\x00" + trigger + strconv.FormatInt(last.LastResyncTime.Unix(), 10)
	case trigger == triggerDriftCheck:
		key += "\x00" + trigger
		if c := stack.Status.LastDriftCheck; c != nil {
			key += strconv.FormatInt(c.Time.Unix(), 10)
		}
	}
	sum := sha256.Sum256([]byte(key))
	upd := &autov1alpha1.Update{
		TypeMeta: metav1.TypeMeta{APIVersion: autov1alpha1.GroupVersion.String(), Kind: "Update"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        stack.Name + "-" + hex.EncodeToString(sum[:])[:8],
			Namespace:   stack.Namespace,
			Labels:      map[string]string{StackNameLabel: stack.Name},
			Annotations: map[string]string{TriggerAnnotation: trigger},
		},
		Spec: autov1alpha1.UpdateSpec{
			WorkspaceName: WorkspaceName(stack),
			StackName:     spec.Stack,
			Type:          typ,
		},
	}
	if typ != autov1alpha1.DestroyType {
		// Undoing drift needs the state refreshed first: without it the
		// state still matches the program and the up changes nothing.
		remediating := trigger == string(TriggerDrift) || driftPending(stack)
		upd.Spec.Refresh = ptr.To(spec.Refresh || remediating)
		if typ == autov1alpha1.UpType && spec.Refresh && spec.ExpectNoRefreshChanges && !remediating {
			upd.Spec.ExpectNoRefreshChanges = ptr.To(true)
		}
		if len(spec.Targets) > 0 {
			upd.Spec.Target = spec.Targets
			upd.Spec.TargetDependents = ptr.To(spec.TargetDependents)
		}
	}
	if spec.RunProgram {
		upd.Spec.RunProgram = ptr.To(true)
	}
	applyUpdateTemplate(upd, spec.UpdateTemplate)
	if upd.Spec.TtlAfterCompleted == nil {
		upd.Spec.TtlAfterCompleted = &metav1.Duration{Duration: DefaultUpdateTTL}
	}
	return upd
}

// DefaultUpdateTTL is how long a finished Update (and its outputs Secret)
// is kept when spec.updateTemplate sets no ttlAfterCompleted, upstream's
// default: resyncs and drift checks would otherwise pile them up. The
// Stack's status keeps what matters (lastUpdate, outputs, history).
const DefaultUpdateTTL = 24 * time.Hour

// TriggerAnnotation on an Update records why the Stack controller started
// it, for the history and the audit trail.
const TriggerAnnotation = "stackyard.dev/trigger"

// applyUpdateTemplate copies the template's labels, annotations and the spec
// fields it sets onto upd; the identifying fields (workspace, stack, type)
// stay the Stack's.
func applyUpdateTemplate(upd *autov1alpha1.Update, tmpl *autov1alpha1.UpdateTemplate) {
	if tmpl == nil {
		return
	}
	if m := tmpl.Metadata; m != nil {
		for k, v := range m.Labels {
			if k != StackNameLabel {
				upd.Labels[k] = v
			}
		}
		for k, v := range m.Annotations {
			if k != TriggerAnnotation {
				upd.Annotations[k] = v
			}
		}
	}
	if tmpl.Spec == nil {
		return
	}
	keep := upd.Spec
	base, _ := json.Marshal(upd.Spec)
	overlay, _ := json.Marshal(tmpl.Spec)
	merged := map[string]any{}
	_ = json.Unmarshal(base, &merged)
	extra := map[string]any{}
	_ = json.Unmarshal(overlay, &extra)
	for k, v := range extra {
		merged[k] = v
	}
	out, _ := json.Marshal(merged)
	_ = json.Unmarshal(out, &upd.Spec)
	upd.Spec.WorkspaceName, upd.Spec.StackName, upd.Spec.Type = keep.WorkspaceName, keep.StackName, keep.Type
}

// updateDone reports whether an Update has finished, and whether it failed.
func updateDone(upd *autov1alpha1.Update) (done, failed bool, reason string) {
	complete := apimeta.FindStatusCondition(upd.Status.Conditions, autov1alpha1.UpdateConditionTypeComplete)
	if complete == nil || complete.Status != metav1.ConditionTrue {
		return false, false, ""
	}
	f := apimeta.FindStatusCondition(upd.Status.Conditions, autov1alpha1.UpdateConditionTypeFailed)
	if f != nil && f.Status == metav1.ConditionTrue {
		return true, true, f.Reason
	}
	return true, false, ""
}
