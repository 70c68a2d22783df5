package stack

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/shard"
	"github.com/stackyard/stackyard/internal/stackrun"
)

// handoverPoll is how often a Stack that moved between shards looks again
// at an Update its former shard still runs: that Update is not in this
// shard's cache, so no event announces its end.
const handoverPoll = 5 * time.Second

// readUpdate reads the Stack's Update name: from the cache, and past it
// when the cache has none, so that an Update the cache has not seen yet,
// or one that another shard runs (a Stack that just moved here), is
// followed instead of being taken for lost. found is false when it does
// not exist at all.
func (s *session) readUpdate(ctx context.Context, name string, upd *autov1alpha1.Update) (found bool, err error) {
	key := client.ObjectKey{Namespace: s.stack.Namespace, Name: name}
	err = s.r.Client.Get(ctx, key, upd)
	if apierrors.IsNotFound(err) {
		err = s.r.apiReader().Get(ctx, key, upd)
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// elsewhere is the wait for an Update another shard runs: the Stack moved
// here while it ran, and that shard finishes it.
func (s *session) elsewhere(upd *autov1alpha1.Update) error {
	return sreconcile.NewWaiting(pulumiv1.ReconcilingProcessingReason,
		fmt.Errorf("%s: update %s runs in shard %s, which this Stack left; waiting for it to finish before shard %s takes over",
			pulumiv1.ReconcilingProcessingUpdateMessage, upd.Name, shard.Of(upd), s.r.Shard), handoverPoll)
}

// workspaceHere reports whether the Stack's Workspace is this shard's: in
// its cache, which holds only the shard's Workspaces.
func (s *session) workspaceHere(ctx context.Context) bool {
	var ws autov1alpha1.Workspace
	return s.r.Client.Get(ctx, client.ObjectKey{Namespace: s.stack.Namespace, Name: stackrun.WorkspaceName(s.stack)}, &ws) == nil && s.r.Shard.Owns(&ws)
}

// mayRunForeign reports whether upd, an Update the Stack did not make,
// may be running on the Stack's Workspace, for the handover to wait for.
// Anyone may label an Update of their own with the Stack's name and write
// its status, so one that never finishes could hold the handover for
// ever. On a governed Stack's Workspace such an Update never runs
// (the Update controller refuses it), so it counts for nothing; on an
// ungoverned Stack's, it counts once it says it started, as whoever could
// keep it so could edit the Stack as well.
func (s *session) mayRunForeign(upd *autov1alpha1.Update) bool {
	return change.AuthorizedStage(s.stack.Annotations) == "" && upd.Spec.WorkspaceName == stackrun.WorkspaceName(s.stack) && !updatePending(upd)
}

// takeOver moves into this shard a pending Update of the Stack's that the
// shard it left made in the moment of the move, after this shard took
// the Workspace: that shard never starts it now (an Update runs only on a
// Workspace of its own shard), and it is the update this shard would make
// itself. The write carries the resourceVersion read, so an Update the
// other shard started meanwhile stays with it.
func (s *session) takeOver(ctx context.Context, upd *autov1alpha1.Update) error {
	base := upd.DeepCopy()
	shard.Stamp(s.stack, upd)
	if err := s.r.Client.Patch(ctx, upd, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return failed(pulumiv1.UpdateCreateFailedReason, "moving update "+upd.Name+" to shard "+s.r.Shard.String(), err)
	}
	return sreconcile.NewWaiting(pulumiv1.ReconcilingProcessingReason,
		fmt.Errorf("%s: update %s, made by shard %s as the Stack left it, moved to shard %s", pulumiv1.ReconcilingProcessingUpdateMessage,
			upd.Name, shard.Of(base), s.r.Shard), handoverPoll)
}

// checkHandover keeps this shard off a Workspace that another shard still
// serves: when the Stack's Workspace is labelled for another shard (the
// Stack moved here), every Update of the Stack that shard may still run
// must finish before the apply relabels the Workspace, which takes it from
// that shard. One that can never run (orphaned) is deleted instead. Only a Workspace missing from this shard's cache is looked
// at, so a Stack that stays put costs nothing.
func (s *session) checkHandover(ctx context.Context, cached *autov1alpha1.Workspace) error {
	if cached != nil || s.r.Shard.Selector().Empty() {
		return nil
	}
	var ws autov1alpha1.Workspace
	err := s.r.apiReader().Get(ctx, client.ObjectKey{Namespace: s.stack.Namespace, Name: stackrun.WorkspaceName(s.stack)}, &ws)
	if apierrors.IsNotFound(err) || (err == nil && s.r.Shard.Owns(&ws)) {
		return nil
	}
	if err != nil {
		return failed(pulumiv1.WorkspaceApplyFailedReason, "reading the Workspace", err)
	}
	var updates autov1alpha1.UpdateList
	if err := s.r.apiReader().List(ctx, &updates, client.InNamespace(s.stack.Namespace), client.MatchingLabels{stackrun.StackNameLabel: s.stack.Name}); err != nil {
		return failed(pulumiv1.WorkspaceApplyFailedReason, "listing the Stack's Updates", err)
	}
	var live *pulumiv1.Stack
	for i := range updates.Items {
		upd := &updates.Items[i]
		if !metav1.IsControlledBy(upd, s.stack) && !s.mayRunForeign(upd) {
			continue
		}
		if done, _, _ := updateDone(upd); done || s.r.Shard.Owns(upd) || !upd.DeletionTimestamp.IsZero() {
			continue
		}
		if live == nil {
			live = &pulumiv1.Stack{}
			if err := s.r.apiReader().Get(ctx, client.ObjectKeyFromObject(s.stack), live); err != nil {
				return failed(pulumiv1.UpdateReadFailedReason, "reading the Stack", err)
			}
		}
		if !orphaned(live, upd, &ws) {
			return s.elsewhere(upd)
		}
		// The shard the Stack left made it and the Workspace, then lost
		// both records (its status patch conflicted with the move) and
		// never comes back to the Stack: the Update cannot start, since
		// the choke point runs nothing the Stack has no record of, and
		// waiting for it would wait for ever. It goes; the apply then
		// finds the unrecorded Workspace and deletes it (ownWorkspace),
		// and this shard makes and records both anew.
		uid, version := upd.UID, upd.ResourceVersion
		if err := s.r.Client.Delete(ctx, upd, client.Preconditions{UID: &uid, ResourceVersion: &version}); err != nil &&
			!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return failed(pulumiv1.UpdateDeleteFailedReason, "deleting update "+upd.Name+", which the Stack has no record of", err)
		}
		s.warn("UpdateOrphaned", fmt.Sprintf("update %s of shard %s never started, and neither it nor workspace %s is recorded by the Stack: "+
			"deleting it, to make the Stack's anew in shard %s", upd.Name, shard.Of(upd), ws.Name, s.r.Shard))
	}
	return nil
}

// orphaned reports whether upd, a pending Update of another shard on the
// Workspace ws, can never run: it has not started, and live, the Stack as
// stored, records neither it as its current update nor ws as its
// Workspace. The choke point allows an operation only with both records,
// which the shard the Stack left no longer writes.
func orphaned(live *pulumiv1.Stack, upd *autov1alpha1.Update, ws *autov1alpha1.Workspace) bool {
	if !updatePending(upd) {
		return false
	}
	if cur := live.Status.CurrentUpdate; cur != nil && cur.UID == upd.UID {
		return false
	}
	rec := live.Status.Workspace
	return rec == nil || rec.UID != ws.UID
}
