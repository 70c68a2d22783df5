package stack

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/stackrun"
)

// triggerFinalize is the trigger recorded for the destroy run on deletion.
const triggerFinalize = "Finalize"

// reconcileDelete runs when the Stack is being deleted. With
// destroyOnFinalize, or once its spec.ttl ran out (expired), and not in
// preview mode, which never destroys, the finalizer stays until a destroy
// has succeeded; failed destroys are retried
// with the usual backoff. Then the Workspace is removed and the finalizer
// with it.
func (s *session) reconcileDelete(ctx context.Context) (sreconcile.Result, error) {
	if !sreconcile.HasFinalizer(s.stack, Finalizer) {
		return sreconcile.ResultEmpty, nil
	}
	if (s.stack.Spec.DestroyOnFinalize || expired(s.stack)) && !s.stack.Spec.Preview {
		if err := s.destroy(ctx); err != nil {
			return sreconcile.ResultEmpty, err
		}
	}
	if err := s.deleteWorkspace(ctx); err != nil {
		return sreconcile.ResultEmpty, err
	}
	sreconcile.RemoveFinalizer(s.stack, Finalizer)
	s.r.freshPolls.Delete(s.stack.UID)
	s.r.branches.forget(client.ObjectKeyFromObject(s.stack))
	return sreconcile.ResultSuccess, nil
}

// destroy drives the destroy Update to success: it returns nil once one
// has succeeded, and a wait while one runs or waits to be retried. It
// reuses the steps of a normal reconcile: follow the current Update,
// resolve the source, apply the Workspace, start the run.
func (s *session) destroy(ctx context.Context) error {
	stack := s.stack
	if _, err := s.observeUpdate(ctx); err != nil {
		if errors.As(err, new(*sreconcile.Ignore)) {
			return destroying(stack) // a drift check ends first
		}
		return err
	}
	if _, err := s.reconcileCleanup(ctx); err != nil {
		return err
	}
	if stack.Status.CurrentUpdate != nil {
		return destroying(stack)
	}
	if err := s.hold(ctx); err != nil {
		if errors.As(err, new(*sreconcile.Waiting)) {
			return sreconcile.NewWaiting(pulumiv1.ChangeHeldReason, fmt.Errorf(
				"the destroy waits, since it would run with a change nobody approved: revert the spec, or promote the change, and it runs: %w", err),
				ResyncInterval(&stack.Spec, s.r.MinResync))
		}
		return err
	}
	if last := stack.Status.LastUpdate; last != nil && last.Type == autov1alpha1.DestroyType {
		if last.State == shared.SucceededStackStateMessage {
			return nil
		}
		cooldown := sreconcile.FailureCooldown(last.Failures, stack.Spec.RetryMaxBackoffDurationSeconds)
		if wait := sreconcile.Remaining(last.LastResyncTime.Time, cooldown, s.now); wait > 0 {
			return sreconcile.NewWaiting(pulumiv1.ReconcilingRetryReason,
				fmt.Errorf("destroying the stack failed; retrying in %s: %s", wait.Round(1e9), last.Message), wait)
		}
	}

	if err := s.destroySource(ctx); err != nil {
		return err
	}
	if err := s.applyWorkspace(ctx, applyAlways); err != nil {
		return err
	}
	upd := stackrun.BuildUpdate(stack, stackrun.UpdateFor{Revision: s.src.Revision, Type: autov1alpha1.DestroyType, Trigger: triggerFinalize})
	if stack.Spec.RemoveOnFinalize {
		upd.Spec.Remove = ptr.To(true)
	}
	if err := s.startUpdate(ctx, upd); err != nil {
		return err
	}
	s.event(corev1.EventTypeNormal, "Destroying", fmt.Sprintf("started destroy %s before deleting the Stack", upd.Name))
	return destroying(stack)
}

// destroying is the wait while the destroy that holds the finalizer runs.
func destroying(stack *pulumiv1.Stack) error {
	return sreconcile.NewWaiting(pulumiv1.ReconcilingProcessingReason, errors.New("destroying the stack before deleting it"),
		ResyncInterval(&stack.Spec, 0))
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
	s.src = stackrun.Source{Revision: "project:" + pi.Name, Project: &autov1alpha1.ProjectInfo{Name: pi.Name, Runtime: pi.Runtime}}
	return nil
}

// isNamespaceTerminating reports whether err is the API server refusing to
// create an object in a namespace that is being deleted.
func isNamespaceTerminating(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "being terminated")
}

// namespaceTerminating is the stall of a Stack whose namespace is being
// deleted: nothing can be created there any more, so a destroy cannot start.
func namespaceTerminating(err error) error {
	return sreconcile.NewStalling(pulumiv1.NamespaceTerminatingReason, fmt.Errorf(
		"the namespace is being deleted, so no Workspace or Update can be created to destroy the stack; "+
			"delete the Stack before its namespace, or remove the finalizer %s to leave the resources in place: %w", Finalizer, err))
}
