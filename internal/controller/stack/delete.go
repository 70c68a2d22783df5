package stack

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// triggerFinalize is the trigger recorded for the destroy run on deletion.
const triggerFinalize = "Finalize"

// reconcileDelete runs when the Stack is being deleted. With
// destroyOnFinalize (and not in preview mode, which never destroys) the
// finalizer stays until a destroy has succeeded; failed destroys are retried
// with the usual backoff. Then the Workspace is removed and the finalizer
// with it.
func (s *session) reconcileDelete(ctx context.Context) error {
	if !sreconcile.HasFinalizer(s.stack, Finalizer) {
		return nil
	}
	if s.stack.Spec.DestroyOnFinalize && !s.stack.Spec.Preview {
		done, err := s.destroy(ctx)
		if err != nil || !done {
			return err
		}
	}
	if err := s.deleteWorkspace(ctx); err != nil {
		return err
	}
	sreconcile.RemoveFinalizer(s.stack, Finalizer)
	s.r.freshPolls.Delete(s.stack.UID)
	return nil
}

// destroy drives the destroy Update to success and reports whether it has
// succeeded. It reuses the steps of a normal reconcile: follow the current
// Update, resolve the source, apply the Workspace, start the run.
func (s *session) destroy(ctx context.Context) (bool, error) {
	stack := s.stack
	if _, err := s.observeUpdate(ctx); err != nil {
		return false, err
	}
	if stack.Status.CurrentUpdate != nil {
		sreconcile.MarkReconciling(&stack.Status.Conditions, stack.Generation, pulumiv1.ReconcilingProcessingReason, s.inProgress)
		return false, nil
	}
	if last := stack.Status.LastUpdate; last != nil && last.Type == autov1alpha1.DestroyType {
		if last.State == shared.SucceededStackStateMessage {
			return true, nil
		}
		cooldown := sreconcile.FailureCooldown(last.Failures, stack.Spec.RetryMaxBackoffDurationSeconds)
		if wait := sreconcile.Remaining(last.LastResyncTime.Time, cooldown, s.now); wait > 0 {
			msg := fmt.Sprintf("destroying the stack failed; retrying in %s: %s", wait.Round(1e9), last.Message)
			sreconcile.MarkReconciling(&stack.Status.Conditions, stack.Generation, pulumiv1.ReconcilingRetryReason, msg)
			return false, sreconcile.NewWaiting(pulumiv1.ReconcilingRetryReason, errors.New(msg), wait)
		}
	}

	if err := s.destroySource(ctx); err != nil {
		return false, err
	}
	if err := s.applyWorkspace(ctx); err != nil {
		return false, err
	}
	upd := BuildUpdate(stack, s.src.Revision, autov1alpha1.DestroyType, triggerFinalize)
	if last := stack.Status.LastUpdate; last != nil && last.Type == autov1alpha1.DestroyType && last.Name == upd.Name {
		// Same inputs as the destroy that just failed: make the retry a new
		// Update.
		upd.Name = fmt.Sprintf("%s-r%d", upd.Name, last.Failures)
	}
	if err := controllerutil.SetControllerReference(stack, upd, s.r.Scheme); err != nil {
		return false, err
	}
	if err := s.r.Client.Create(ctx, upd); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, terminatingOr(err)
	}
	stack.Status.CurrentUpdate = &shared.CurrentStackUpdate{
		Generation: stack.Generation, ReconcileRequest: reconcileRequest(stack), Name: upd.Name, Commit: s.src.Revision,
	}
	sreconcile.MarkReconciling(&stack.Status.Conditions, stack.Generation, pulumiv1.ReconcilingProcessingReason, "destroying the stack before deleting it")
	s.event("Normal", "Destroying", fmt.Sprintf("started destroy %s before deleting the Stack", upd.Name))
	return false, nil
}

// destroySource resolves the program for the destroy. When the source is
// gone (repository deleted, Program removed), a destroy needs only the
// project's name and runtime, which earlier successful runs recorded in
// status.projectInfo: the Workspace then gets a project file and nothing
// else.
func (s *session) destroySource(ctx context.Context) error {
	src, err := s.r.resolveSource(ctx, s.stack)
	if err == nil {
		s.src = src
		return nil
	}
	pi := s.stack.Status.ProjectInfo
	if pi == nil {
		return fmt.Errorf("the source is unavailable and no project info was recorded to destroy without it: %w", err)
	}
	s.src = Source{Revision: "project:" + pi.Name, Project: &autov1alpha1.ProjectInfo{Name: pi.Name, Runtime: pi.Runtime}}
	return nil
}

// isNamespaceTerminating reports whether err is the API server refusing to
// create an object in a namespace that is being deleted.
func isNamespaceTerminating(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "being terminated")
}

// terminatingOr turns the namespace-terminating refusal into a stall with its
// own reason and passes any other error through.
func terminatingOr(err error) error {
	if isNamespaceTerminating(err) {
		return namespaceTerminating(err)
	}
	return err
}

// namespaceTerminating is the stall of a Stack whose namespace is being
// deleted: nothing can be created there any more, so a destroy cannot start.
func namespaceTerminating(err error) error {
	return sreconcile.NewStalling(pulumiv1.NamespaceTerminatingReason, fmt.Errorf(
		"the namespace is being deleted, so no Workspace or Update can be created to destroy the stack; "+
			"delete the Stack before its namespace, or remove the finalizer %s to leave the resources in place: %w", Finalizer, err))
}
