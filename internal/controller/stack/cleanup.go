package stack

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
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
	if st.CurrentUpdate == nil && reclaimWorkspace(s.stack) && st.LastUpdate != nil && st.LastUpdate.State == shared.SucceededStackStateMessage {
		if err := s.deleteWorkspace(ctx); err != nil {
			return sreconcile.ResultEmpty, err
		}
	}
	return sreconcile.ResultEmpty, nil
}
