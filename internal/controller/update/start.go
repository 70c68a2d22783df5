package update

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/metadata"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/readset"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	stackruntime "github.com/stackyard/stackyard/internal/runtime"
)

// reconcileFinalizer adds the finalizer and asks for a requeue, so that it
// is recorded before an operation can start.
func (r *Reconciler) reconcileFinalizer(s *session) (sreconcile.Result, error) {
	if sreconcile.AddFinalizer(s.obj, autov1alpha1.UpdateFinalizer) {
		return sreconcile.ResultRequeue, nil
	}
	return sreconcile.ResultEmpty, nil
}

// reconcileSpec fails an Update whose spec cannot be run: it names no
// workspace or stack, or no known operation type. The API server's schema
// accepts these (every field is optional, for templates), the agent would
// not.
func (r *Reconciler) reconcileSpec(ctx context.Context, s *session) (sreconcile.Result, error) {
	spec := &s.obj.Spec
	var problem string
	switch {
	case spec.WorkspaceName == "":
		problem = "spec.workspaceName is required"
	case spec.StackName == "":
		problem = "spec.stackName is required"
	}
	switch spec.Type {
	case autov1alpha1.PreviewType, autov1alpha1.UpType, autov1alpha1.DestroyType, autov1alpha1.RefreshType:
	default:
		if problem == "" {
			problem = fmt.Sprintf("spec.type %q is not one of preview, up, destroy, refresh", spec.Type)
		}
	}
	if problem == "" {
		return sreconcile.ResultEmpty, nil
	}
	return r.refuse(ctx, s, problem)
}

// refuse fails the Update before it starts, for problem, which a person
// must fix: the Update is never run.
func (r *Reconciler) refuse(ctx context.Context, s *session, problem string) (sreconcile.Result, error) {
	return r.refuseAs(ctx, s, autov1alpha1.UpdateReasonFailed, problem)
}

// refuseAs is refuse with reason as the Failed condition's and the
// event's reason.
func (r *Reconciler) refuseAs(ctx context.Context, s *session, reason, problem string) (sreconcile.Result, error) {
	spec := &s.obj.Spec
	now := metav1.NewTime(r.now())
	st := &s.obj.Status
	st.MarkFailed(reason, problem)
	stampConditions(st, s.obj.Generation)
	st.Message = problem
	st.EndTime = now
	s.announce = append(s.announce, func(context.Context) {
		r.event(s.obj, corev1.EventTypeWarning, reason, "Run", "%s", problem)
		r.Options.Metrics.ObserveUpdate(string(spec.Type), ResultFailed, 0)
	})
	log.FromContext(ctx).Info("the Update cannot run", "problem", problem)
	return sreconcile.ResultRequeue, nil
}

// reconcileWorkspace waits until the Update's Workspace serves: Ready=True
// (its stacks are set up) and Active=True (its agent runs), both for its
// current generation, and not being deleted (autov1alpha1.Workspace's
// Serving). An idle agent is started by the Workspace controller because
// this Update is not complete. The Workspace is read
// live, not from the cache, so that a spec change the Stack controller has
// just made to it is seen before an operation starts on the previous
// program; but only once the cache shows it serving: until then the cache
// is enough to say "wait" (the watch on Workspaces wakes the Update when
// that changes), which spares the API server a read for every look at
// every waiting Update of a burst.
func (r *Reconciler) reconcileWorkspace(ctx context.Context, s *session) (sreconcile.Result, error) {
	name := s.obj.Spec.WorkspaceName
	key := types.NamespacedName{Namespace: s.obj.Namespace, Name: name}
	cached := &autov1alpha1.Workspace{}
	if err := r.Client.Get(ctx, key, cached); err == nil {
		if reason, msg := r.notServing(cached); msg != "" {
			return r.pendingServing(s, reason, msg)
		}
	}
	ws := &autov1alpha1.Workspace{}
	err := r.APIReader.Get(ctx, key, ws)
	switch {
	case apierrors.IsNotFound(err):
		return r.pending(s, fmt.Sprintf("waiting for workspace %s to exist", name))
	case err != nil:
		return sreconcile.ResultEmpty, sreconcile.NewGeneric("", fmt.Errorf("reading workspace %s: %w", name, err))
	}
	if !r.Options.Shard.Owns(ws) {
		// The Workspace's agent is another shard's to run and to serve.
		return r.pending(s, r.Options.Shard.Elsewhere("spec.workspaceName", "workspace", ws).Error())
	}
	if reason, msg := r.notServing(ws); msg != "" {
		return r.pendingServing(s, reason, msg)
	}
	s.ws = ws
	return sreconcile.ResultEmpty, nil
}

// reconcileAuthorize asks the operator's one choke point,
// change.Authorize, whether the Update may run in its Workspace, right
// before it starts: every operation the operator runs passes here, whatever
// started it (a Stack's reconcile, a resync, a drift check, a retry, a
// promotion, a pull request, a person). The Workspace and the Update's
// makers are read live. A refused Update fails without running, with the
// refusal's reason, a Warning event and a count in the refusal metric; one
// whose maker has not recorded it yet waits a moment.
func (r *Reconciler) reconcileAuthorize(ctx context.Context, s *session) (sreconcile.Result, error) {
	v, err := change.Authorize(ctx, r.APIReader, s.obj, s.ws, r.now())
	switch {
	case err != nil:
		return sreconcile.ResultEmpty, sreconcile.NewGeneric("", fmt.Errorf("deciding whether the Update may run: %w", err))
	case v.Allowed:
		log.FromContext(ctx).V(1).Info("operation authorized", "by", v.By, "because", v.Message)
		s.reads = v.Reads
		return sreconcile.ResultEmpty, nil
	case v.Wait:
		s.obj.Status.MarkProgressing(autov1alpha1.UpdateReasonPending, v.Message)
		stampConditions(&s.obj.Status, s.obj.Generation)
		return sreconcile.ResultEmpty, sreconcile.NewWaiting(autov1alpha1.UpdateReasonPending, errors.New(v.Message), v.Recheck)
	}
	typ := string(s.obj.Spec.Type)
	s.announce = append(s.announce, func(context.Context) { r.Options.Metrics.ObserveRefusal(typ, v.Reason) })
	return r.refuseAs(ctx, s, v.Reason, "refused: "+v.Message)
}

// notServing says what an Update waits for while ws does not serve it,
// with the reason of its Progressing condition; msg is empty when it
// does. While ws is not Ready the reason is WaitingForWorkspace: a Stack
// that sees its Workspace Ready knows from it that the Update's message
// is behind, and that the Update is about to start.
func (r *Reconciler) notServing(ws *autov1alpha1.Workspace) (reason, msg string) {
	switch {
	case !ws.DeletionTimestamp.IsZero():
		return autov1alpha1.UpdateReasonPending, fmt.Sprintf("workspace %s is being deleted", ws.Name)
	case !readyAtGeneration(ws):
		return autov1alpha1.UpdateReasonWaitingForWorkspace, fmt.Sprintf("waiting for workspace %s to be ready", ws.Name)
	case !ws.Serving(), !r.agentRunning(ws):
		return autov1alpha1.UpdateReasonPending, fmt.Sprintf("waiting for the agent of workspace %s to start", ws.Name)
	}
	return "", ""
}

// agentRunning asks runtimes whose agents die with the operator whether the
// agent ws's status names still runs: after a restart the status can name
// the previous process's agent until the Workspace controller has started a
// new one, and an operation started against it would only be interrupted.
func (r *Reconciler) agentRunning(ws *autov1alpha1.Workspace) bool {
	live, ok := r.Runtime.(stackruntime.Liveness)
	return !ok || live.Running(ws)
}

// readyAtGeneration reports whether ws is Ready for its current generation.
func readyAtGeneration(ws *autov1alpha1.Workspace) bool {
	c := apimeta.FindStatusCondition(ws.Status.Conditions, autov1alpha1.WorkspaceReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == ws.Generation
}

// pending records that the Update waits (Progressing=True, reason Pending)
// and stops the reconcile until the wait interval has passed or a watch
// wakes it.
func (r *Reconciler) pending(s *session, msg string) (sreconcile.Result, error) {
	return r.pendingAs(s, autov1alpha1.UpdateReasonPending, msg)
}

// pendingAs is pending with reason, one of the reasons of an Update that
// has not started (UpdateStatus.NotStarted).
func (r *Reconciler) pendingAs(s *session, reason, msg string) (sreconcile.Result, error) {
	s.obj.Status.MarkProgressing(reason, msg)
	stampConditions(&s.obj.Status, s.obj.Generation)
	return sreconcile.ResultEmpty, sreconcile.NewWaiting(autov1alpha1.UpdateReasonPending, errors.New(msg), r.Options.WaitInterval)
}

// pendingServing is pendingAs for an Update whose Workspace does not serve
// yet (reason and msg, from notServing), except that an Update of a Stack that has no
// Progressing condition yet is left as it is: a missing condition reads as
// pending to its Stack, the Workspace controller and the dashboard, and the
// Stack reports the wait for its Workspace itself, with the Workspace's
// reason when it fails. In a burst every update waits so, and the write
// this spares was one in every twenty of an update's API requests.
func (r *Reconciler) pendingServing(s *session, reason, msg string) (sreconcile.Result, error) {
	if ownedByStack(s.obj) && apimeta.FindStatusCondition(s.obj.Status.Conditions, autov1alpha1.UpdateConditionTypeProgressing) == nil {
		return sreconcile.ResultEmpty, sreconcile.NewWaiting(reason, errors.New(msg), r.Options.WaitInterval)
	}
	return r.pendingAs(s, reason, msg)
}

// reconcileStart claims the workspace for this Update, records that the
// operation runs (Progressing=True, reason InProgress, startTime) and only
// then starts it in its own goroutine, so that an operator that stops
// between the two leaves an Update the next one recognises as interrupted,
// never one that runs twice. Another operation of this operator in the same
// workspace makes the Update wait for it: the agent runs one at a time, and
// selecting a stack for one operation must not switch it under another.
func (r *Reconciler) reconcileStart(ctx context.Context, s *session) (sreconcile.Result, error) {
	key := client.ObjectKeyFromObject(s.obj)
	wsKey := types.NamespacedName{Namespace: s.obj.Namespace, Name: s.obj.Spec.WorkspaceName}
	run, other, ok := r.runs.reserve(key, s.obj.UID, wsKey)
	if !ok {
		if other == nil {
			return sreconcile.ResultEmpty, sreconcile.NewGeneric("", errShuttingDown)
		}
		return r.pending(s, fmt.Sprintf("waiting for Update %s to finish in workspace %s", other.key.Name, wsKey.Name))
	}

	spec := &s.obj.Spec
	st := &s.obj.Status
	st.MarkProgressing(autov1alpha1.UpdateReasonInProgress,
		fmt.Sprintf("running %s of stack %s in workspace %s", spec.Type, spec.StackName, spec.WorkspaceName))
	stampConditions(st, s.obj.Generation)
	st.StartTime = metav1.NewTime(r.now())
	st.EndTime = metav1.Time{}
	st.Message = ""
	if err := s.patcher.Patch(ctx, s.obj); err != nil {
		r.runs.remove(run)
		// Another Update of the Workspace may have found it taken meanwhile.
		r.wakeWorkspace(ctx, wsKey, key)
		return sreconcile.ResultEmpty, sreconcile.NewGeneric("", fmt.Errorf("recording the start: %w", err))
	}

	obj, ws, reads := s.obj.DeepCopy(), s.ws.DeepCopy(), s.reads
	opLog := r.log.WithValues("namespace", obj.Namespace, "name", obj.Name, "workspace", ws.Name,
		"stack", spec.StackName, "type", spec.Type)
	timeout := r.Options.OperationTimeout
	r.runs.start(run, func(ctx context.Context) *outcome {
		if timeout > 0 {
			// A timer, not a deadline: gRPC would send a deadline to the
			// agent, whose own clock can then end the operation before this
			// process sees its deadline pass, and the outcome would read
			// "the agent stopped" instead of naming the timeout. Cancelled
			// from here, the cause is set before the agent hears of it.
			var cancel context.CancelCauseFunc
			ctx, cancel = context.WithCancelCause(ctx)
			timer := time.AfterFunc(timeout, func() { cancel(timedOut{after: timeout}) })
			defer func() { timer.Stop(); cancel(nil) }()
		}
		if reads != nil {
			// The agent refuses to run with other versions than these.
			ctx = metadata.AppendToOutgoingContext(ctx, readset.Header, reads.Encode())
		}
		return r.operate(ctx, opLog, obj, ws)
	})
	log.FromContext(ctx).Info("operation started", "workspace", ws.Name, "stack", spec.StackName, "type", spec.Type)
	r.progress(s.obj, EventStarted, "started %s of stack %s in workspace %s", spec.Type, spec.StackName, spec.WorkspaceName)
	return sreconcile.ResultSuccess, nil
}
