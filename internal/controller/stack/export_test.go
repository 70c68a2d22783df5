package stack

import (
	"context"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/stackrun"
)

// ApplyWorkspace runs the Workspace step of one reconcile (a resync, which
// may skip the apply) of stack resolved to src, for the tests on the real API server.
func (r *Reconciler) ApplyWorkspace(ctx context.Context, stack *pulumiv1.Stack, src stackrun.Source) error {
	s := &session{r: r, stack: stack, now: r.now(), src: src}
	return s.applyWorkspace(ctx, applyIfChanged)
}
