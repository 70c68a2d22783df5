package workspace

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/runtime"
)

// Defaults of Options.
const (
	// DefaultIdleAfter is how long an unused agent keeps running.
	DefaultIdleAfter = time.Minute
	// DefaultResync is how often an active Workspace is looked at again.
	DefaultResync = 30 * time.Second
	// DefaultStartInterval is how soon a starting agent is looked at again.
	DefaultStartInterval = 2 * time.Second
	// DefaultQueuedInterval is how soon a Workspace queued for a place to
	// run its agent is looked at again if the runtime has not woken it.
	DefaultQueuedInterval = 30 * time.Second
	// DefaultSetupTimeout bounds the agent calls of one setup, `pulumi
	// install` included.
	DefaultSetupTimeout = 15 * time.Minute
)

// +kubebuilder:rbac:groups=auto.pulumi.com,resources=workspaces,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=auto.pulumi.com,resources=workspaces/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=auto.pulumi.com,resources=workspaces/finalizers,verbs=update
// +kubebuilder:rbac:groups=auto.pulumi.com,resources=updates,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Options tune the Reconciler; zero values take the defaults.
type Options struct {
	// IdleAfter is how long an agent stays up without pending Updates
	// before it is idled; zero means DefaultIdleAfter.
	IdleAfter time.Duration
	// Resync is how often an active Workspace is looked at again even
	// without events, to notice an agent that died; zero means
	// DefaultResync.
	Resync time.Duration
	// StartInterval is how soon a starting agent is looked at again; zero
	// means DefaultStartInterval.
	StartInterval time.Duration
	// QueuedInterval is how soon a Workspace queued for a place to run
	// its agent is looked at again without the runtime waking it; zero
	// means DefaultQueuedInterval.
	QueuedInterval time.Duration
	// SetupTimeout bounds the agent calls of one setup (install included);
	// zero means DefaultSetupTimeout.
	SetupTimeout time.Duration
	// Owns lists the kinds the runtime creates owned by Workspaces (the
	// kubernetes runtime's StatefulSets), whose changes wake their owner.
	Owns []client.Object
	// RuntimeEvents, when set, delivers Workspaces the runtime wants
	// reconciled (the local runtime's exited agents; see NotifyChannel).
	RuntimeEvents <-chan event.GenericEvent
	// MaxConcurrentReconciles is how many Workspaces are reconciled at
	// once; zero means 4.
	MaxConcurrentReconciles int
	// StallAfter is how long the same failure may last before the
	// Workspace is Stalled instead of Reconciling (it keeps retrying);
	// zero means reconcile.DefaultStallAfter.
	StallAfter time.Duration
	// Refusals counts the agents the choke point refused to start.
	Refusals Refusals
}

// Refusals receives one observation per agent the choke point
// (change.AuthorizeWorkspace) refused to start, with the refusal's reason.
// It must not block.
type Refusals interface {
	ObserveRefusal(kind, reason string)
}

// nopRefusals discards the observations.
type nopRefusals struct{}

func (nopRefusals) ObserveRefusal(string, string) {}

// Reconciler reconciles Workspaces; see the package doc. Build it with
// its fields set, as every reconciler of the operator is built, and
// register it with SetupWithManager, which fills in the defaults of the
// Options left zero.
type Reconciler struct {
	// Client reads from the cache and writes Workspaces and what they own.
	Client client.Client
	// APIReader reads live objects where the cache is not enough; it is
	// the manager's API reader once SetupWithManager has run.
	APIReader client.Reader
	// Scheme knows api/auto/v1alpha1 and api/pulumi/v1.
	Scheme *k8sruntime.Scheme
	// Runtime runs the agents.
	Runtime runtime.Runtime
	// Recorder emits events (mgr.GetEventRecorder("workspace-controller")).
	Recorder events.EventRecorder
	// Options are the controller's settings.
	Options Options

	// pace spreads the safety-net looks of queued Workspaces: the
	// runtime wakes each when its turn comes.
	pace sreconcile.Pacer
}

// now is the time the reconcile works with.
func (r *Reconciler) now() time.Time { return time.Now() }

// withDefaults returns opts with every setting left zero at its default.
func (opts Options) withDefaults() Options {
	if opts.IdleAfter <= 0 {
		opts.IdleAfter = DefaultIdleAfter
	}
	if opts.Resync <= 0 {
		opts.Resync = DefaultResync
	}
	if opts.StartInterval <= 0 {
		opts.StartInterval = DefaultStartInterval
	}
	if opts.QueuedInterval <= 0 {
		opts.QueuedInterval = DefaultQueuedInterval
	}
	if opts.SetupTimeout <= 0 {
		opts.SetupTimeout = DefaultSetupTimeout
	}
	if opts.MaxConcurrentReconciles <= 0 {
		opts.MaxConcurrentReconciles = 4
	}
	if opts.Refusals == nil {
		opts.Refusals = nopRefusals{}
	}
	return opts
}

// session is one reconcile of one Workspace.
type session struct {
	ws      *autov1alpha1.Workspace
	patcher *sreconcile.Patcher
	// agent is what the runtime's Ensure reported.
	agent runtime.Status
	// requeueAfter is when to look again after a successful reconcile;
	// zero means only on events.
	requeueAfter time.Duration
}

// errDone ends the chain of steps early with success (the agent idled, a
// stalled generation left alone).
var errDone = sreconcile.NewIgnore("done", nil)

// forget stops the agent of a Workspace that is gone, for runtimes whose
// agents belong to the operator (local): one deleted without its finalizer
// running (removed by hand) would otherwise keep its process, and its place
// among --max-agents, until the operator restarts. Pods of the kubernetes
// runtime go with their owner.
func (r *Reconciler) forget(ctx context.Context, key types.NamespacedName) error {
	if _, ownsAgents := r.Runtime.(runtime.Liveness); !ownsAgents {
		return nil
	}
	gone := &autov1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	return r.Runtime.Idle(ctx, gone)
}

// Reconcile brings one Workspace's agent and stacks to its spec:
//
//	reconcileFinalizer → reconcileStalled → reconcileActivity → reconcileAgent → reconcileSetup
//
// and writes the status once, in a deferred function, whatever the path.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	ws := &autov1alpha1.Workspace{}
	if err := r.Client.Get(ctx, req.NamespacedName, ws); err != nil {
		if apierrors.IsNotFound(err) {
			r.pace.Done(req.NamespacedName)
			return ctrl.Result{}, r.forget(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	s := &session{ws: ws, patcher: sreconcile.NewPatcher(r.Client, ws)}
	var res sreconcile.Result
	var err error
	defer func() {
		r.finish(ctx, s, err)
		if perr := s.patcher.Patch(ctx, ws); perr != nil && !apierrors.IsNotFound(perr) {
			result, retErr = ctrl.Result{}, errors.Join(retErr, perr)
		}
	}()

	if !ws.DeletionTimestamp.IsZero() {
		res, err = r.reconcileDelete(ctx, s)
	} else {
		res, err = sreconcile.Steps{
			{Name: "reconcileFinalizer", Run: func(context.Context) (sreconcile.Result, error) { return r.reconcileFinalizer(s) }},
			{Name: "reconcileStalled", Run: func(ctx context.Context) (sreconcile.Result, error) { return r.reconcileStalled(ctx, s) }},
			{Name: "reconcileActivity", Run: func(ctx context.Context) (sreconcile.Result, error) { return r.reconcileActivity(ctx, s) }},
			{Name: "reconcileAuthorize", Run: func(ctx context.Context) (sreconcile.Result, error) { return r.reconcileAuthorize(ctx, s) }},
			{Name: "reconcileAgent", Run: func(ctx context.Context) (sreconcile.Result, error) { return r.reconcileAgent(ctx, s) }},
			{Name: "reconcileSetup", Run: func(ctx context.Context) (sreconcile.Result, error) { return r.reconcileSetup(ctx, s) }},
		}.Run(ctx)
		err = sreconcile.Escalate(ws.Status.Conditions, ws.Generation, err, r.now(), r.Options.StallAfter)
		var stalling *sreconcile.Stalling
		if errors.As(err, &stalling) {
			// Nothing will run in a stalled generation: release the agent.
			if ierr := r.idle(ctx, s, "the workspace is stalled"); ierr != nil {
				log.FromContext(ctx).Error(ierr, "idling a stalled workspace")
			}
		}
	}
	return sreconcile.ComputeResult(res, err, sreconcile.Schedule{Interval: s.requeueAfter, JitterFraction: 0.05,
		Pacer: &r.pace, Object: req.NamespacedName})
}

// finish turns the reconcile's error into conditions and an event; the
// steps themselves record success.
func (r *Reconciler) finish(ctx context.Context, s *session, err error) {
	ws := s.ws
	var stalling *sreconcile.Stalling
	var ignore *sreconcile.Ignore
	switch {
	case err == nil, errors.As(err, &ignore), !ws.DeletionTimestamp.IsZero():
		return
	case errors.As(err, &stalling):
		if !stalledAt(ws) {
			r.Recorder.Eventf(ws, nil, corev1.EventTypeWarning, stalling.Reason, "Setup", "%s", err.Error())
		}
		markStalled(ws, stalling.Reason, err.Error())
		log.FromContext(ctx).Info("workspace stalled", "reason", stalling.Reason, "message", err.Error())
	default:
		markPending(ws, sreconcile.Reason(err), err.Error())
	}
}

// reconcileFinalizer adds the finalizer before anything runs, and
// requeues so that it is stored first.
func (r *Reconciler) reconcileFinalizer(s *session) (sreconcile.Result, error) {
	if sreconcile.AddFinalizer(s.ws, autov1alpha1.WorkspaceFinalizer) {
		return sreconcile.ResultRequeue, nil
	}
	return sreconcile.ResultEmpty, nil
}

// reconcileStalled leaves a generation that stalled alone, with its agent
// idled, until the spec changes. A stall that only says a failure has
// lasted (sreconcile.Escalate) is retried like the failure it was.
func (r *Reconciler) reconcileStalled(ctx context.Context, s *session) (sreconcile.Result, error) {
	if !stalledAt(s.ws) || sreconcile.IsLastingFailure(s.ws.Status.Conditions) {
		return sreconcile.ResultEmpty, nil
	}
	if err := r.idle(ctx, s, "the workspace is stalled"); err != nil {
		return sreconcile.ResultEmpty, err
	}
	return sreconcile.ResultEmpty, errDone
}

// reconcileDelete releases the runtime's resources, then the finalizer.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *session) (sreconcile.Result, error) {
	if !sreconcile.HasFinalizer(s.ws, autov1alpha1.WorkspaceFinalizer) {
		return sreconcile.ResultEmpty, nil
	}
	if err := r.Runtime.Delete(ctx, s.ws); err != nil {
		return sreconcile.ResultEmpty, sreconcile.NewGeneric("", err)
	}
	sreconcile.RemoveFinalizer(s.ws, autov1alpha1.WorkspaceFinalizer)
	log.FromContext(ctx).Info("workspace agent deleted", "runtime", r.Runtime.Name())
	return sreconcile.ResultSuccess, nil
}
