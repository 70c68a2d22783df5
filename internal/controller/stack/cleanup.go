package stack

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/stackrun"
)

// reconcileCleanup deletes what the Stack no longer needs, once nothing of
// it runs: the Update observeUpdate abandoned (it never started, and its
// Workspace cannot run it until the spec is fixed), and, with
// workspaceReclaimPolicy Delete, the Workspace once the last update
// succeeded. Each deletion is idempotent, and currentUpdate is cleared only
// after its Update is gone, so a reconcile killed at any line redoes the
// rest.
func (s *session) reconcileCleanup(ctx context.Context) (sreconcile.Result, error) {
	st := &s.stack.Status
	if upd := s.abandoned; upd != nil {
		if err := s.r.Client.Delete(ctx, upd); client.IgnoreNotFound(err) != nil {
			return sreconcile.ResultEmpty, failed(pulumiv1.UpdateDeleteFailedReason, "deleting update "+upd.Name+" that cannot run", err)
		}
		st.CurrentUpdate = nil
	}
	if reclaimable(s.stack) {
		if err := s.reclaim(ctx); err != nil {
			return sreconcile.ResultEmpty, err
		}
	}
	return sreconcile.ResultEmpty, nil
}

// reclaimable reports whether the Stack's Workspace is due for deletion:
// workspaceReclaimPolicy Delete, nothing running, and the last update
// succeeded.
func reclaimable(stack *pulumiv1.Stack) bool {
	st := &stack.Status
	return reclaimWorkspace(stack) && st.CurrentUpdate == nil &&
		st.LastUpdate != nil && st.LastUpdate.State == shared.SucceededStackStateMessage
}

// reclaim deletes the Workspace of a reclaimable Stack. The Stack read from
// the cache may be behind its own last status patch: a reconcile woken by
// the Workspace and Update it just created can still see no currentUpdate,
// and deleting the Workspace then would leave that Update waiting for a
// Workspace that never comes back. So when there is a Workspace to delete,
// the Stack is read again past the cache first, and a newer status wins.
func (s *session) reclaim(ctx context.Context) error {
	var ws autov1alpha1.Workspace
	key := client.ObjectKey{Namespace: s.stack.Namespace, Name: stackrun.WorkspaceName(s.stack)}
	if err := s.r.Client.Get(ctx, key, &ws); apierrors.IsNotFound(err) || !ws.DeletionTimestamp.IsZero() {
		return nil
	}
	var live pulumiv1.Stack
	if err := s.r.apiReader().Get(ctx, client.ObjectKeyFromObject(s.stack), &live); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return failed(pulumiv1.WorkspaceDeleteFailedReason, "reading the Stack before deleting its Workspace", err)
	}
	if live.ResourceVersion != s.stack.ResourceVersion && !reclaimable(&live) {
		return sreconcile.NewWaiting(pulumiv1.ReconcilingProcessingReason,
			errors.New(pulumiv1.ReconcilingProcessingUpdateMessage), time.Second)
	}
	return s.deleteWorkspace(ctx)
}
