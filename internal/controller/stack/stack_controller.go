package stack

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
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

	// freshPolls remembers, per Stack UID, the reconcile request whose
	// fresh poll of the branch is done, so that a Stack that keeps waiting
	// (on prerequisites, on its Workspace) after a request does not query
	// the remote afresh on every reconcile. Lost on restart, which costs one
	// more fresh poll.
	freshPolls sync.Map
}

// session is one reconcile of one Stack: the steps are its methods and
// share what earlier steps learned.
type session struct {
	r     *Reconciler
	stack *pulumiv1.Stack
	now   time.Time

	// src is the resolved source (reconcileSource).
	src Source
	// decision is the update-due decision (reconcileUpdate).
	decision Decision
	// inProgress, when set, is why the stack is Reconciling while an
	// update it started runs.
	inProgress string
}

// step is one named step of a reconcile. stop ends the chain early without
// an error (e.g. an update is running: nothing more to do until it ends).
type step struct {
	name string
	run  func(ctx context.Context) (stop bool, err error)
}

// Reconcile brings one Stack a step closer to its spec. The chain is:
//
//	reconcileFinalizer → observeUpdate → reconcileSource →
//	reconcileWorkspace → reconcileUpdate
//
// and, for a Stack being deleted, reconcileDelete. Status is computed from
// what the steps found and patched once, in finalizeStatus.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	stack := &pulumiv1.Stack{}
	if err := r.Client.Get(ctx, req.NamespacedName, stack); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s := &session{r: r, stack: stack, now: r.now()}
	patcher := sreconcile.NewPatcher(r.Client, stack)
	defer func() {
		result, retErr = s.finalizeStatus(ctx, retErr)
		if err := patcher.Patch(ctx, stack); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()

	if !stack.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, s.reconcileDelete(ctx)
	}
	steps := []step{
		{"reconcileFinalizer", s.reconcileFinalizer},
		{"observeUpdate", s.observeUpdate},
		{"reconcileSource", s.reconcileSource},
		{"reconcileWorkspace", s.reconcileWorkspace},
		{"reconcileUpdate", s.reconcileUpdate},
	}
	for _, st := range steps {
		stop, err := st.run(ctx)
		if err != nil {
			log.FromContext(ctx).V(1).Info("step ended the reconcile", "step", st.name, "error", err.Error())
			return ctrl.Result{}, err
		}
		if stop {
			break
		}
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// reconcileFinalizer adds the finalizer before any work, so that creating
// objects for the Stack and deleting it cannot race. The patch is sent at
// once and the reconcile continues.
func (s *session) reconcileFinalizer(ctx context.Context) (bool, error) {
	base := s.stack.DeepCopy()
	if sreconcile.AddFinalizer(s.stack, Finalizer) {
		if err := s.r.Client.Patch(ctx, s.stack, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return true, err
		}
	}
	return false, nil
}

// reconcileSource resolves the program's current revision.
func (s *session) reconcileSource(ctx context.Context) (bool, error) {
	src, err := s.r.resolveSource(ctx, s.stack)
	if err != nil {
		return true, err
	}
	s.src = src
	return false, nil
}

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
