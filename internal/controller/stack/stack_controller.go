package stack

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/shard"
	"github.com/stackyard/stackyard/internal/stackrun"
)

// Finalizer holds a Stack until the operator has cleaned up after it (its
// Workspace, and with destroyOnFinalize its resources). It is upstream's
// name, so that Stacks move between the two operators without orphaning it.
const Finalizer = "finalizer.stack.pulumi.com"

// FieldManager is the field manager of the objects this controller applies.
const FieldManager = "stackyard-stack-controller"

// What the Stack controller needs of the API (collected into
// config/rbac/role.yaml by `make generate`). Secrets are read one by one,
// never cached or listed (internal/operator).
//
// +kubebuilder:rbac:groups=pulumi.com,resources=stacks,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=pulumi.com,resources=stacks/status;stacks/finalizers,verbs=get;update;patch
// +kubebuilder:rbac:groups=pulumi.com,resources=programs,verbs=get;list;watch
// +kubebuilder:rbac:groups=auto.pulumi.com,resources=workspaces;updates,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=gitrepositories;ocirepositories;buckets;externalartifacts,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler reconciles Stacks.
type Reconciler struct {
	// Client reads and writes the API.
	Client client.Client
	// APIReader reads past the cache, where a stale read would do harm
	// (reclaiming a Workspace an update was just started on); Client when
	// nil.
	APIReader client.Reader
	// Scheme knows the API types (for owner references).
	Scheme *runtime.Scheme
	// Recorder emits Kubernetes events on Stacks.
	Recorder events.EventRecorder
	// Poller answers branch heads, shared by every Stack.
	Poller GitPoller
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// MinResync is the shortest poll/resync interval; zero means
	// DefaultMinResync (60 s). Tests lower it.
	MinResync time.Duration
	// StallAfter is how long the same failure (an API call, a missing
	// Secret) may last before the Stack is Stalled instead of Reconciling;
	// zero means sreconcile.DefaultStallAfter (5 minutes).
	StallAfter time.Duration
	// Shard is the part of the cluster's Stacks this controller reconciles
	// (internal/shard); the zero value is all of them. The cache may hold
	// other shards' Stacks (the default shard's holds every Stack): they are
	// left alone.
	Shard shard.Shard

	// recordsDropped is set once the API server has dropped a Stack's
	// status.workspace from a status patch: its Stack CRD is older than
	// this operator, no record of a Workspace is kept, and deleting every
	// Workspace the Stack has no record of would delete it again on every
	// reconcile (ownWorkspace stalls instead).
	recordsDropped atomic.Bool
	// freshPolls remembers, per Stack UID, the reconcile request whose
	// fresh poll of the branch is done, so that a Stack that keeps waiting
	// (on prerequisites, on its Workspace) after a request does not query
	// the remote afresh on every reconcile. Lost on restart, which costs one
	// more fresh poll.
	freshPolls sync.Map
	// applied remembers the last apply of each Workspace, to skip one that
	// would change nothing.
	applied appliedWorkspaces
	// writes remembers the Stacks this controller wrote, to tell a cached
	// copy that does not show the write yet.
	writes sreconcile.Writes
	// pace spreads the safety-net looks of waiting Stacks (a running
	// Update ends with a watch event, not a poll).
	pace sreconcile.Pacer
	// branches polls the branches Stacks track and wakes them when one
	// moves; nil until SetupWithManager, and then Stacks poll on their
	// own timers.
	branches *branches
}

// requeueSoon is how soon a Stack whose cached copy is behind the last
// write is looked at again; the watch usually brings the write within
// milliseconds.
const requeueSoon = 100 * time.Millisecond

// apiReader reads past the cache: APIReader, or Client when it is nil.
func (r *Reconciler) apiReader() client.Reader {
	if r.APIReader == nil {
		return r.Client
	}
	return r.APIReader
}

// session is one reconcile of one Stack: the steps are its methods and
// share what earlier steps learned.
type session struct {
	r     *Reconciler
	stack *pulumiv1.Stack
	now   time.Time
	// patcher writes the Stack's changes: once at the end (finish), and
	// early for the finalizer.
	patcher *sreconcile.Patcher

	// src is the resolved source (reconcileSource).
	src stackrun.Source
	// decision is the update-due decision (reconcileUpdate).
	decision Decision
	// abandoned is an Update that never started and whose Workspace
	// cannot run it (observeUpdate); reconcileCleanup deletes it.
	abandoned *autov1alpha1.Update
	// deletedWorkspace records that this reconcile deleted the Workspace
	// (reclaim), which the cache may not show yet.
	deletedWorkspace bool
	// started records that this reconcile created an Update and recorded
	// it as currentUpdate; once that record is written, finish deletes the
	// Updates that no record names (dropUnrecorded).
	started bool
}

// Reconcile brings one Stack a step closer to its spec. The chain is:
//
//	reconcileFinalizer → observeUpdate → reconcileCleanup → reconcileHold →
//	reconcileExpiry → reconcileSource → reconcileWorkspace → reconcileUpdate →
//	reconcileDrift → reportLastUpdate
//
// and, for a Stack being deleted, reconcileDelete. Each step returns a
// typed error (internal/reconcile) that says what happens next; finish, in a
// defer, turns the outcome into conditions, patches the status once and
// maps the outcome to controller-runtime's result.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	stack := &pulumiv1.Stack{}
	if err := r.Client.Get(ctx, req.NamespacedName, stack); err != nil {
		if apierrors.IsNotFound(err) {
			r.writes.Forget(req.NamespacedName)
			r.branches.forget(req.NamespacedName)
			r.pace.Done(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !r.Shard.Owns(stack) {
		// Another shard's, or moved to one: that shard reconciles it.
		r.branches.forget(req.NamespacedName)
		r.pace.Done(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if r.writes.Behind(stack) {
		// Woken (by its Update or Workspace) before the cache has this
		// controller's last write of the Stack: deciding again on the
		// older copy would repeat that decision. Look again shortly.
		return ctrl.Result{RequeueAfter: requeueSoon}, nil
	}
	s := &session{r: r, stack: stack, now: r.now(), patcher: sreconcile.NewPatcher(r.Client, stack)}
	var (
		res sreconcile.Result
		err error
	)
	defer func() {
		result, retErr = s.finish(ctx, res, err)
		r.writes.Record(s.stack, s.patcher.Versions())
	}()

	if !stack.DeletionTimestamp.IsZero() {
		res, err = s.reconcileDelete(ctx)
		return
	}
	res, err = sreconcile.Steps{
		{Name: "reconcileFinalizer", Run: s.reconcileFinalizer},
		{Name: "observeUpdate", Run: s.observeUpdate},
		{Name: "reconcileCleanup", Run: s.reconcileCleanup},
		{Name: "reconcileHold", Run: s.reconcileHold},
		{Name: "reconcileExpiry", Run: s.reconcileExpiry},
		{Name: "reconcileSource", Run: s.reconcileSource},
		{Name: "reconcileWorkspace", Run: s.reconcileWorkspace},
		{Name: "reconcileUpdate", Run: s.reconcileUpdate},
		{Name: "reconcileDrift", Run: s.reconcileDrift},
		{Name: "reportLastUpdate", Run: s.reportLastUpdate},
	}.Run(ctx)
	return
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// reconcileFinalizer adds the finalizer before any work, so that creating
// objects for the Stack and deleting it cannot race. The patcher sends it at
// once (with the resourceVersion, as for any change of finalizers) and
// takes the answer as its new base, so the deferred patch does not send it
// again; the reconcile continues.
func (s *session) reconcileFinalizer(ctx context.Context) (sreconcile.Result, error) {
	if sreconcile.AddFinalizer(s.stack, Finalizer) {
		if err := s.patcher.Patch(ctx, s.stack); err != nil {
			return sreconcile.ResultEmpty, failed(pulumiv1.FinalizerFailedReason, "adding the finalizer", err)
		}
		if s.patcher.Gone() {
			// Deleted before it was held: nothing may be created for it.
			return sreconcile.ResultEmpty, errStackGone
		}
	}
	return sreconcile.ResultEmpty, nil
}

// errStackGone ends a reconcile of a Stack deleted while it ran.
var errStackGone = sreconcile.NewIgnore("StackDeleted", errors.New("the Stack was deleted"))

// event records a Kubernetes event on the Stack. Messages never carry
// secret values: they come from statuses and errors that are redacted at
// their source.
func (s *session) event(eventType, reason, note string) {
	if s.r.Recorder != nil {
		s.r.Recorder.Eventf(s.stack, nil, eventType, reason, "Reconcile", "%s", note)
	}
}

// warn records a Warning event.
func (s *session) warn(reason, note string) { s.event(corev1.EventTypeWarning, reason, note) }
