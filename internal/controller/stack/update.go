package stack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/shard"
)

// reconcileUpdate starts an update when one is due: it checks the
// prerequisites and the Workspace, then starts the Update. When none is
// due the chain goes on (drift check, report of the last update); when one
// was started it stops, waiting for it.
func (s *session) reconcileUpdate(ctx context.Context) (sreconcile.Result, error) {
	stack := s.stack
	s.decision = Decide(&stack.Spec, stack.Status.LastUpdate, s.observed())
	if !s.decision.Due || (conflictStalled(stack) && s.decision.Trigger == TriggerRetry) {
		return sreconcile.ResultEmpty, nil
	}
	if err := s.checkPrerequisites(ctx); err != nil {
		return sreconcile.ResultEmpty, err
	}
	if err := s.workspaceStall(ctx); err != nil {
		return sreconcile.ResultEmpty, err
	}
	if reclaimWorkspace(stack) {
		if err := s.applyWorkspace(ctx, applyAlways); err != nil {
			return sreconcile.ResultEmpty, err
		}
	}
	if err := s.checkPin(ctx, s.src.Revision, s.updateType()); err != nil {
		return sreconcile.ResultEmpty, err
	}
	upd := BuildUpdate(stack, s.src.Revision, s.updateType(), string(s.decision.Trigger))
	if err := s.startUpdate(ctx, upd); err != nil {
		return sreconcile.ResultEmpty, err
	}
	s.event(corev1.EventTypeNormal, "UpdateStarted", fmt.Sprintf("started %s %s (%s) on revision %s", upd.Spec.Type, upd.Name, s.decision.Trigger, s.src.Revision))
	// The wait says what the next reconciles will say while the Update
	// waits, so that they have nothing to write.
	return sreconcile.ResultEmpty, s.running(ctx, upd)
}

// startUpdate creates upd, owned by the Stack, and records it as the
// Stack's currentUpdate. Every Update the Stack runs (update, drift check,
// destroy) starts here. The Update's name is derived from what it is for,
// so a reconcile killed between creating it and recording it finds the
// same Update next time (AlreadyExists is success, once claimOwn has
// checked that the Update found is the Stack's own).
func (s *session) startUpdate(ctx context.Context, upd *autov1alpha1.Update) error {
	if err := controllerutil.SetControllerReference(s.stack, upd, s.r.Scheme); err != nil {
		return err
	}
	err := s.r.Client.Create(ctx, upd)
	switch {
	case err == nil:
	case apierrors.IsAlreadyExists(err):
		if err := s.claimOwn(ctx, upd.Name); err != nil {
			return err
		}
	case isNamespaceTerminating(err):
		return namespaceTerminating(err)
	case apierrors.IsInvalid(err):
		return sreconcile.NewStallingRequeue(pulumiv1.UpdateCreateFailedReason,
			fmt.Errorf("update %s built from the Stack's spec (and its spec.updateTemplate) was rejected: %w", upd.Name, err), s.r.stallAfter())
	default:
		return failed(pulumiv1.UpdateCreateFailedReason, "creating update "+upd.Name, err)
	}
	s.stack.Status.CurrentUpdate = &shared.CurrentStackUpdate{
		Generation:       s.stack.Generation,
		ReconcileRequest: reconcileRequest(s.stack),
		Name:             upd.Name,
		Commit:           s.src.Revision,
	}
	return nil
}

// claimOwn checks that the Update called name, which already exists, is
// the one an earlier reconcile of this Stack created, and stalls the
// Stack when it is not (nameTaken).
func (s *session) claimOwn(ctx context.Context, name string) error {
	var found autov1alpha1.Update
	ok, err := s.readUpdate(ctx, name, &found)
	switch {
	case err != nil:
		return failed(pulumiv1.UpdateReadFailedReason, "reading update "+name, err)
	case !ok:
		return failed(pulumiv1.UpdateCreateFailedReason, "creating update "+name,
			errors.New("an Update of that name existed and is gone: trying again"))
	}
	return s.ownOrTaken("update", &found)
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
		Watched:          s.src.Watched,
	}
}

// reconcileRequest is the value of the Stack's reconciliation-request
// annotation.
func reconcileRequest(stack *pulumiv1.Stack) string {
	return stack.Annotations[shared.ReconcileRequestAnnotation]
}

// BuildUpdate returns the Update that runs typ for the Stack at revision,
// with the Stack's updateTemplate merged in, and an up held to the Stack's
// update plan when it has one for revision (PlanFor). Its name is a digest of what it
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
	if plan := PlanFor(stack, revision); typ == autov1alpha1.UpType && plan != "" {
		// A new plan (a new promotion of the same commit) is a new
		// Update.
		key += "\x00plan\x00" + plan
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
	// The Update runs in the Stack's shard, whatever the template says.
	shard.Stamp(stack, upd)
	// Created held, as the Update controller would hold it before running
	// it: one write fewer per Update than adding it on its first reconcile.
	sreconcile.AddFinalizer(upd, autov1alpha1.UpdateFinalizer)
	holdToPlan(upd, stack, revision)
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
