package workspace

import (
	"context"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/runtime"
)

// UpdateIndex is the field index of Updates (complete or not) by
// spec.workspaceName, which the controller lists to decide whether a
// Workspace is in use and since when it is not.
const UpdateIndex = "workspace.stackyard.dev/update-workspace"

// usage is what a Workspace's Updates say about its use.
type usage struct {
	pending  []string // incomplete Updates
	running  string   // an Update whose operation runs, if any
	lastUsed time.Time
	prevUsed time.Time // when the Update before the last one completed
}

// usageOf lists ws's Updates.
func (r *Reconciler) usageOf(ctx context.Context, ws *autov1alpha1.Workspace) (usage, error) {
	var list autov1alpha1.UpdateList
	if err := r.Client.List(ctx, &list, client.InNamespace(ws.Namespace), client.MatchingFields{UpdateIndex: ws.Name}); err != nil {
		return usage{}, sreconcile.NewGeneric("", fmt.Errorf("listing the Updates of the workspace: %w", err))
	}
	var u usage
	for i := range list.Items {
		up := &list.Items[i]
		if !up.Status.IsComplete() {
			if up.DeletionTimestamp.IsZero() {
				u.pending = append(u.pending, up.Name)
			}
			if c := apimeta.FindStatusCondition(up.Status.Conditions, autov1alpha1.UpdateConditionTypeProgressing); c != nil &&
				c.Status == metav1.ConditionTrue && c.Reason == autov1alpha1.UpdateReasonInProgress {
				u.running = up.Name
			}
			continue
		}
		done := up.Status.EndTime.Time
		if t := completedAt(up); t.After(done) {
			done = t
		}
		switch {
		case done.After(u.lastUsed):
			u.prevUsed, u.lastUsed = u.lastUsed, done
		case done.After(u.prevUsed):
			u.prevUsed = done
		}
	}
	return u, nil
}

// maxWarmFactor bounds how long a rhythm keeps an agent up: at most this
// many times IdleAfter.
const maxWarmFactor = 10

// warmFor is how long an agent stays up after its last use: IdleAfter, or
// longer when the Workspace's Updates come in a rhythm, as a Stack under
// frequent changes or a pipeline stage's successive promotions do: half
// as long again as the gap between its last two Updates, so the next one
// finds the agent warm. A rhythm slower than maxWarmFactor times IdleAfter
// is not worth an agent kept up meanwhile.
func warmFor(idleAfter time.Duration, u usage) time.Duration {
	if u.prevUsed.IsZero() || u.lastUsed.IsZero() {
		return idleAfter
	}
	gap := u.lastUsed.Sub(u.prevUsed)
	if warm := gap + gap/2; warm > idleAfter && warm <= maxWarmFactor*idleAfter {
		return warm
	}
	return idleAfter
}

// completedAt is when the Update's Complete condition turned True.
func completedAt(up *autov1alpha1.Update) time.Time {
	if c := apimeta.FindStatusCondition(up.Status.Conditions, autov1alpha1.UpdateConditionTypeComplete); c != nil {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// reconcileActivity decides whether the agent should run: while Updates
// are pending, while the current generation is not set up, and for
// warmFor after the last use (IdleAfter, longer for a rhythm of Updates),
// unless other Workspaces wait for a place to run. Otherwise it idles the agent and ends the
// reconcile. A new generation waits for a running Update first, since
// applying it may restart the agent under the operation.
func (r *Reconciler) reconcileActivity(ctx context.Context, s *session) (sreconcile.Result, error) {
	ws := s.ws
	u, err := r.usageOf(ctx, ws)
	if err != nil {
		return sreconcile.ResultEmpty, err
	}
	settled := trueAt(ws, autov1alpha1.WorkspaceReady)
	if u.running != "" && ws.Status.ObservedGeneration != ws.Generation {
		return sreconcile.ResultEmpty, sreconcile.NewWaiting(ReasonUpdateInProgress,
			fmt.Errorf("waiting for Update %s to finish before applying generation %d", u.running, ws.Generation), r.Options.StartInterval)
	}
	if len(u.pending) > 0 || !settled {
		s.requeueAfter = r.Options.Resync
		if len(u.pending) == 0 {
			// Once set up, the idle clock starts.
			s.requeueAfter = min(r.Options.IdleAfter+100*time.Millisecond, r.Options.Resync)
		}
		return sreconcile.ResultEmpty, nil
	}
	lastUsed := u.lastUsed
	if c := apimeta.FindStatusCondition(ws.Status.Conditions, autov1alpha1.WorkspaceActive); c != nil && c.Status == metav1.ConditionTrue &&
		c.LastTransitionTime.After(lastUsed) {
		lastUsed = c.LastTransitionTime.Time
	}
	idleAfter := warmFor(r.Options.IdleAfter, u)
	why := fmt.Sprintf("no pending Updates for %s", idleAfter)
	if c, ok := r.Runtime.(runtime.Contention); ok && c.Queued() > 0 {
		// Others wait for a place to run their agent: this one gives its
		// place up as soon as it has nothing to do.
		idleAfter, why = 0, fmt.Sprintf("no pending Updates, and %d Workspaces wait for a place to run their agent", c.Queued())
	}
	if !lastUsed.IsZero() && activeCondition(ws) {
		if left := lastUsed.Add(idleAfter).Sub(r.now()); left > 0 {
			s.requeueAfter = min(left+100*time.Millisecond, r.Options.Resync)
			return sreconcile.ResultEmpty, nil
		}
	}
	if err := r.idle(ctx, s, why); err != nil {
		return sreconcile.ResultEmpty, err
	}
	return sreconcile.ResultEmpty, errDone
}

// activeCondition reports whether Active is True (at any generation).
func activeCondition(ws *autov1alpha1.Workspace) bool {
	return apimeta.IsStatusConditionTrue(ws.Status.Conditions, autov1alpha1.WorkspaceActive)
}

// idle stops the agent and records it (Active=False, reason Idle, no
// address). It records no event: an agent stops after every update, and
// the Active condition says so and why; an event each time would cost a
// write per update and bury the ones that matter.
func (r *Reconciler) idle(ctx context.Context, s *session, why string) error {
	ws := s.ws
	if err := r.Runtime.Idle(ctx, ws); err != nil {
		return sreconcile.NewGeneric("", fmt.Errorf("idling the agent: %w", err))
	}
	if c := apimeta.FindStatusCondition(ws.Status.Conditions, autov1alpha1.WorkspaceActive); c == nil || c.Reason != ReasonIdle {
		log.FromContext(ctx).Info("workspace agent idled", "why", why)
	}
	setActive(ws, false, ReasonIdle, "the agent is stopped: "+why)
	ws.Status.Address = ""
	return nil
}
