package update

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/agent/readset"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	stackruntime "github.com/stackyard/stackyard/internal/runtime"
	"github.com/stackyard/stackyard/internal/shard"
)

// Event reasons, besides the failure reasons of the Failed condition
// (UpdateFailed, UpdateConflict, Interrupted, Cancelled), which Warning
// events use as they are.
const (
	// EventStarted: the operation was handed to the workspace's agent.
	EventStarted = "UpdateStarted"
	// EventSucceeded: the operation finished without error.
	EventSucceeded = "UpdateSucceeded"
	// EventExpired: the Update was deleted once its ttlAfterCompleted had
	// passed.
	EventExpired = "UpdateExpired"
	// EventRecovered: before the operation, the agent repaired what an
	// interrupted run had left (stale locks, pending operations, damaged
	// backend files). A Warning: a cleared pending create can stand for a
	// resource that exists and is no longer managed.
	EventRecovered = "Recovered"
)

// Defaults of Options.
const (
	// DefaultConnectTimeout is how long an operation waits for the agent to
	// accept a connection before it gives up (reason Interrupted).
	DefaultConnectTimeout = 30 * time.Second
	// DefaultShutdownTimeout is how long a stopping manager waits for the
	// running operations' goroutines to return once cancelled.
	DefaultShutdownTimeout = 10 * time.Second
	// DefaultWaitInterval is how often a pending Update looks at its
	// workspace again, besides the watch that wakes it when the workspace
	// becomes ready.
	DefaultWaitInterval = 30 * time.Second
)

// requeueSoon is how soon a reconcile that changed the Update's phase
// (finalizer added, outcome recorded) comes back for the next phase.
const requeueSoon = 100 * time.Millisecond

// runningPoll is how often a running Update is looked at, in case the
// notification that its operation ended was lost.
const runningPoll = time.Minute

// Options tune the Update reconciler. The zero value is usable.
type Options struct {
	// MaxConcurrentReconciles is the number of reconcile workers; zero
	// means 4. Operations do not hold a worker, but each look at an Update
	// that starts one reads it and its Workspace from the API server, and
	// a burst of Stacks makes many of them at once.
	MaxConcurrentReconciles int
	// Metrics receives one observation per finished Update; nil discards.
	Metrics Metrics
	// ConnectTimeout bounds the wait for the agent's connection; zero
	// means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// ShutdownTimeout bounds the wait for cancelled operations when the
	// manager stops; zero means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// WaitInterval is how often a pending Update is looked at again; zero
	// means DefaultWaitInterval.
	WaitInterval time.Duration
	// OperationTimeout bounds one operation: past it, the operation is
	// cancelled (the agent interrupts the Pulumi CLI, then kills what is
	// left of it) and the Update fails saying so, which the Stack counts
	// as a failed update. Zero means no bound beyond the program's own
	// (customTimeouts).
	OperationTimeout time.Duration
	// DashboardURL is the dashboard's external base URL; when set, an
	// Update whose backend gives no permalink (every self-managed backend)
	// gets the address of its dashboard page (DashboardPermalink) instead.
	DashboardURL string
	// Shard is the operator's shard: an Update runs only on a Workspace of
	// this shard, whatever shard its own label names. The zero value is
	// the default shard alone, which owns every Workspace.
	Shard shard.Shard
}

// DashboardPermalink is the address of an Update's page on the dashboard
// served at base (internal/dashboard serves /updates/{namespace}/{name}).
func DashboardPermalink(base, namespace, name string) string {
	return strings.TrimRight(base, "/") + "/updates/" + url.PathEscape(namespace) + "/" + url.PathEscape(name)
}

// Reconciler runs each Update's operation once through its Workspace's
// agent and records the outcome in the Update's status. See the package
// documentation for the life of an Update. Build it with its fields set,
// as every reconciler of the operator is built, and register it with
// SetupWithManager, which fills in the defaults of the Options left zero
// and makes it read live objects through the manager's API reader where
// the cache is not enough: the Update whose outcome it records, and a
// Workspace about to run an operation.
type Reconciler struct {
	// Client reads from the cache and writes Updates and their outputs.
	Client client.Client
	// APIReader reads live objects; Client when left nil, and the
	// manager's API reader once SetupWithManager has run.
	APIReader client.Reader
	// Scheme knows api/auto/v1alpha1.
	Scheme *runtime.Scheme
	// Runtime reaches the Workspaces' agents.
	Runtime stackruntime.Runtime
	// Recorder emits events (mgr.GetEventRecorder("update-controller")).
	Recorder events.EventRecorder
	// Options are the controller's settings.
	Options Options

	// prepared makes the state below once, on the first of
	// SetupWithManager and Reconcile.
	prepared sync.Once
	runs     *runners
	wake     chan event.TypedGenericEvent[*autov1alpha1.Update]
	// pace spreads the safety-net looks of pending Updates: their
	// Workspace's watch wakes them when it is ready.
	pace sreconcile.Pacer
	// log is the base logger of the operations' goroutines, which outlive
	// the reconcile that starts them (and so must not log its ID).
	log logr.Logger
}

// now is the time the reconcile works with.
func (r *Reconciler) now() time.Time { return time.Now() }

// prepare fills in the defaults and makes the operations' state.
func (r *Reconciler) prepare() {
	r.prepared.Do(func() {
		opts := &r.Options
		if opts.Metrics == nil {
			opts.Metrics = NopMetrics{}
		}
		if opts.ConnectTimeout <= 0 {
			opts.ConnectTimeout = DefaultConnectTimeout
		}
		if opts.ShutdownTimeout <= 0 {
			opts.ShutdownTimeout = DefaultShutdownTimeout
		}
		if opts.WaitInterval <= 0 {
			opts.WaitInterval = DefaultWaitInterval
		}
		if opts.MaxConcurrentReconciles <= 0 {
			opts.MaxConcurrentReconciles = 4
		}
		if r.APIReader == nil {
			r.APIReader = r.Client
		}
		r.wake = make(chan event.TypedGenericEvent[*autov1alpha1.Update], 1024)
		r.log = ctrl.Log.WithName("update")
		r.runs = newRunners(opts.ShutdownTimeout, func(run *run) { r.notify(run.key) })
	})
}

// +kubebuilder:rbac:groups=auto.pulumi.com,resources=updates,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=auto.pulumi.com,resources=updates/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=auto.pulumi.com,resources=updates/finalizers,verbs=update
// +kubebuilder:rbac:groups=auto.pulumi.com,resources=workspaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=auto.pulumi.com,resources=workspaces/rpc,verbs=use
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// session is one reconcile of one Update.
type session struct {
	obj     *autov1alpha1.Update
	run     *run
	patcher *sreconcile.Patcher
	// ws is the ready Workspace, once reconcileWorkspace has found it.
	ws *autov1alpha1.Workspace
	// reads are the versions of the Secrets and ConfigMaps the choke
	// point checked (change.Verdict.Reads); the agent runs the operation
	// only with exactly these.
	reads readset.Set
	// requeueAfter overrides requeueSoon for a ResultRequeue.
	requeueAfter time.Duration
	// announce runs once the status has been written: events, metrics and
	// the release of a finished run.
	announce []func(ctx context.Context)
}

// Reconcile moves one Update through its life: wait for the workspace,
// start the operation, record its outcome, expire. It never waits for an
// operation: that runs in its own goroutine and wakes the Update when done.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	r.prepare()
	obj := &autov1alpha1.Update{}
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		obj = nil
	}
	// Look at the runs first: a run leaves the registry only after its
	// outcome was written, so an Update without a run read after this
	// point shows that outcome.
	run := r.runs.get(req.NamespacedName)
	if run != nil && (obj == nil || obj.UID != run.uid) {
		if !r.forgetRun(ctx, run) {
			return ctrl.Result{RequeueAfter: runningPoll}, nil
		}
		run = nil
	}
	if obj == nil {
		r.pace.Done(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if run != nil && !run.finished() {
		if !obj.DeletionTimestamp.IsZero() {
			log.FromContext(ctx).Info("the Update is being deleted: cancelling its operation")
			r.runs.cancelRun(run, errDeleted)
		}
		return ctrl.Result{RequeueAfter: runningPoll}, nil
	}
	// The outcome of a run is recorded on the live object. Every other
	// decision (start an operation, declare one interrupted) is made on the
	// cached one, which may not show yet what a run that just finished
	// wrote: its patches carry the resourceVersion read (a Locked
	// patcher), so a decision made on a stale Update fails with a conflict
	// and is made again, instead of starting an operation twice or
	// overwriting an outcome. Waiting Updates, the many in a burst, cost
	// the API server no read.
	if run != nil {
		if err := r.APIReader.Get(ctx, req.NamespacedName, obj); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if obj.UID != run.uid {
			r.forgetRun(ctx, run)
			run = nil
		}
	}

	s := &session{obj: obj, run: run, patcher: sreconcile.NewPatcher(r.Client, obj).Locked()}
	var (
		res sreconcile.Result
		err error
	)
	defer func() { result, retErr = r.finish(ctx, s, res, err) }()

	switch {
	case s.run != nil:
		res, err = r.recordOutcome(ctx, s)
	case obj.Status.IsComplete():
		res, err = r.reconcileCompleted(ctx, s)
	case !obj.DeletionTimestamp.IsZero():
		res, err = r.reconcileDelete(s)
	default:
		res, err = sreconcile.Steps{
			{Name: "reconcileFinalizer", Run: func(context.Context) (sreconcile.Result, error) { return r.reconcileFinalizer(s) }},
			{Name: "reconcileInterrupted", Run: func(ctx context.Context) (sreconcile.Result, error) { return r.reconcileInterrupted(ctx, s) }},
			{Name: "reconcileSpec", Run: func(ctx context.Context) (sreconcile.Result, error) { return r.reconcileSpec(ctx, s) }},
			{Name: "reconcileWorkspace", Run: func(ctx context.Context) (sreconcile.Result, error) { return r.reconcileWorkspace(ctx, s) }},
			{Name: "reconcileAuthorize", Run: func(ctx context.Context) (sreconcile.Result, error) { return r.reconcileAuthorize(ctx, s) }},
			{Name: "reconcileStart", Run: func(ctx context.Context) (sreconcile.Result, error) { return r.reconcileStart(ctx, s) }},
		}.Run(ctx)
	}
	return ctrl.Result{}, nil
}

// finish patches the Update once, then announces what the reconcile did
// (only once it is recorded, so that a failed patch retried later does not
// announce twice) and maps the outcome to controller-runtime's result.
func (r *Reconciler) finish(ctx context.Context, s *session, res sreconcile.Result, err error) (ctrl.Result, error) {
	if failedBeforeStart(s.obj, err) {
		// The operator's own call failed (reading the Workspace, claiming
		// it): say so on the Update, which waits, and so on its Stack.
		s.obj.Status.MarkProgressing(autov1alpha1.UpdateReasonPending, sreconcile.Truncate("retrying after an error: "+err.Error(), sreconcile.MaxConditionMessage))
		stampConditions(&s.obj.Status, s.obj.Generation)
	}
	if perr := s.patcher.Patch(ctx, s.obj); perr != nil {
		if apierrors.IsConflict(perr) {
			// Decided on a cached Update that was behind: look again
			// once the cache has the newer one.
			log.FromContext(ctx).V(1).Info("the Update changed meanwhile: reconciling it again", "error", perr.Error())
			return ctrl.Result{RequeueAfter: requeueSoon}, nil
		}
		if err != nil {
			log.FromContext(ctx).Error(err, "reconcile failed before the patch failed")
		}
		return ctrl.Result{}, perr
	}
	for _, a := range s.announce {
		a(ctx)
	}
	after := s.requeueAfter
	if after <= 0 {
		after = requeueSoon
	}
	return sreconcile.ComputeResult(res, err, sreconcile.Schedule{RequeueAfter: after,
		Pacer: &r.pace, Object: client.ObjectKeyFromObject(s.obj)})
}

// forgetRun drops a run whose Update is gone or was replaced by another
// object of the same name: a finished run is removed (its outcome has
// nowhere to go), a running one is cancelled and stays until it has
// stopped. It reports whether the run was removed.
func (r *Reconciler) forgetRun(ctx context.Context, run *run) bool {
	if !run.finished() {
		r.runs.cancelRun(run, errDeleted)
		return false
	}
	r.release(ctx, run)
	return true
}

// release unregisters a finished run and wakes the Updates that wait for
// its workspace.
func (r *Reconciler) release(ctx context.Context, run *run) {
	r.runs.remove(run)
	r.wakeWorkspace(ctx, run.workspace, run.key)
}

// notify asks for a reconcile of the Update key without blocking: a full
// queue drops the request, and the Update's periodic requeue covers it.
func (r *Reconciler) notify(key types.NamespacedName) {
	obj := &autov1alpha1.Update{}
	obj.Namespace, obj.Name = key.Namespace, key.Name
	select {
	case r.wake <- event.TypedGenericEvent[*autov1alpha1.Update]{Object: obj}:
	default:
	}
}

// maxEventNote is the events API's limit on an event's note, in bytes.
const maxEventNote = 1024

// event emits an event about obj, its note cut to what the events API
// accepts.
func (r *Reconciler) event(obj *autov1alpha1.Update, eventType, reason, action, format string, args ...any) {
	r.Recorder.Eventf(obj, nil, eventType, reason, action, "%s", sreconcile.Truncate(fmt.Sprintf(format, args...), maxEventNote))
}

// progress emits a Normal event about the progress of obj (started,
// succeeded), unless a Stack owns it: the Stack records the same moments
// (UpdateStarted, UpdateSucceeded) on itself, where its users look, and a
// second event per moment would only double the writes of every update.
// Warnings are always emitted.
func (r *Reconciler) progress(obj *autov1alpha1.Update, reason, format string, args ...any) {
	if ownedByStack(obj) {
		return
	}
	r.event(obj, corev1.EventTypeNormal, reason, "Run", format, args...)
}

// ownedByStack reports whether a Stack is obj's controller: the Stack then
// reports obj's progress where its users look.
func ownedByStack(obj *autov1alpha1.Update) bool {
	owner := metav1.GetControllerOf(obj)
	return owner != nil && owner.Kind == "Stack" && owner.APIVersion == pulumiv1.GroupVersion.String()
}

// errShuttingDown refuses to start an operation once the registry of runs
// has stopped.
var errShuttingDown = errors.New("the operator is shutting down")

// failedBeforeStart reports whether err is a failure (not a wait) of a
// reconcile of an Update whose operation has not started.
func failedBeforeStart(obj *autov1alpha1.Update, err error) bool {
	if err == nil || errors.As(err, new(*sreconcile.Waiting)) || errors.As(err, new(*sreconcile.Ignore)) || !obj.DeletionTimestamp.IsZero() {
		return false
	}
	return !obj.Status.IsComplete() && obj.Status.NotStarted()
}
