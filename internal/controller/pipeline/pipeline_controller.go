package pipeline

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/source"
)

// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=pipelines,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=pipelines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=pipelines/finalizers,verbs=update
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=releases,verbs=get;list;watch;create;delete;patch
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=promotions,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Polling intervals.
const (
	// DefaultInterval is how often a Pipeline without spec.interval polls
	// its repository.
	DefaultInterval = time.Minute
	// DefaultMinInterval is the shortest interval a Pipeline may poll at.
	DefaultMinInterval = 10 * time.Second
)

// Condition reasons of a Pipeline's Reconciling and Stalled conditions.
const (
	// SourceUnavailableReason: the repository could not be listed or
	// fetched; the message names the Pipeline field at fault.
	SourceUnavailableReason = "SourceUnavailable"
	// ReferenceNotFoundReason: the Secret spec.git.secretRef names, or its
	// keys, do not exist.
	ReferenceNotFoundReason = promotionv1alpha1.PipelineReasonReferenceNotFound
	// SecretReadFailedReason: the Secret could not be read.
	SecretReadFailedReason = promotionv1alpha1.PipelineReasonSecretReadFailed
	// ReleaseListFailedReason: the Pipeline's Releases, or the Promotions
	// that protect them, could not be listed.
	ReleaseListFailedReason = "ReleaseListFailed"
	// ReleaseCreateFailedReason: a Release could not be created.
	ReleaseCreateFailedReason = "ReleaseCreateFailed"
	// ReleaseDeleteFailedReason: a Release beyond the retention could not
	// be deleted.
	ReleaseDeleteFailedReason = "ReleaseDeleteFailed"
)

// Event reasons.
const ()

// readyMessage is the Ready message of a Pipeline that polled its
// repository.
const readyMessage = "the releases are up to date with the repository"

// Source is what the controller asks of git: the shared poller
// (source.Poller) in the operator.
type Source interface {
	// Refs lists the repository's refs, sharing one query per interval.
	Refs(ctx context.Context, repoURL string, auth *source.GitAuth, maxAge time.Duration) ([]source.Ref, error)
	// History returns depth commits of head's history, newest first.
	History(ctx context.Context, repoURL string, head source.Ref, auth *source.GitAuth, depth int) ([]source.Commit, error)
	// Describe returns the commits refs point to, by SHA.
	Describe(ctx context.Context, repoURL string, refs []source.Ref, auth *source.GitAuth) (map[string]source.Commit, error)
}

// Options tunes the controller.
type Options struct {
	// MinInterval lowers the floor of spec.interval (DefaultMinInterval);
	// only tests set it.
	MinInterval time.Duration
	// StallAfter is how long the same failure may last before the
	// Pipeline is Stalled; zero means sreconcile.DefaultStallAfter.
	StallAfter time.Duration
}

// Reconciler reconciles Pipelines: it lists the repository's refs, finds
// the versions that are not releases yet, records each as an immutable
// Release owned by the Pipeline, and prunes the releases beyond the
// retention that nothing uses. Each step reads what exists and makes it so,
// so a reconcile stopped anywhere is completed by the next.
//
// The chain:
//
//	validateSpec → reconcileSource → discoverReleases → createReleases →
//	pruneReleases
//
// A Pipeline has no finalizer: its Releases are deleted with it by the
// garbage collector, as their owner.
type Reconciler struct {
	// Client reads from the cache and writes Pipelines and Releases.
	Client client.Client
	// APIReader reads Secrets straight from the API server: they are never
	// cached, and the operator may only get them.
	APIReader client.Reader
	// Scheme knows api/promotion/v1alpha1.
	Scheme *runtime.Scheme
	// Recorder emits events (mgr.GetEventRecorder("pipeline-controller")).
	Recorder events.EventRecorder
	// Poller answers what a repository's branches and tags point at.
	Poller Source
	// Options are the controller's settings.
	Options Options

	// handled remembers, per Pipeline, the last reconcile request
	// (shared.ReconcileRequestAnnotation) answered with a fresh poll.
	handled sync.Map
}

// now is the time the reconcile works with.
func (r *Reconciler) now() time.Time { return time.Now() }

// session is what one reconcile of one Pipeline learns, step by step.
type session struct {
	pipeline *promotionv1alpha1.Pipeline
	interval time.Duration
	sel      selection
	auth     *source.GitAuth
	refs     []source.Ref
	// releases are the Pipeline's Releases: those that existed, then
	// those this reconcile created.
	releases []promotionv1alpha1.Release
	// found are the new versions, newest first.
	found []candidate
}

// Reconcile brings one Pipeline's Releases in line with its repository.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	obj := &promotionv1alpha1.Pipeline{}
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.handled.Delete(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	patcher := sreconcile.NewPatcher(r.Client, obj)
	s := &session{pipeline: obj, interval: Interval(obj, r.Options.MinInterval)}
	var (
		res sreconcile.Result
		err error
	)
	defer func() {
		result, retErr = r.finish(ctx, s, patcher, res, err)
	}()
	res, err = sreconcile.Steps{
		{Name: "validateSpec", Run: func(context.Context) (sreconcile.Result, error) { return r.validateSpec(s) }},
		{Name: "reconcileSource", Run: func(ctx context.Context) (sreconcile.Result, error) { return r.reconcileSource(ctx, s) }},
		{Name: "discoverReleases", Run: func(ctx context.Context) (sreconcile.Result, error) { return r.discoverReleases(ctx, s) }},
		{Name: "createReleases", Run: func(ctx context.Context) (sreconcile.Result, error) { return r.createReleases(ctx, s) }},
		{Name: "pruneReleases", Run: func(ctx context.Context) (sreconcile.Result, error) { return r.pruneReleases(ctx, s) }},
	}.Run(ctx)
	return
}

// finish summarizes the outcome (a failure lasting longer than the stall
// bound as a stall), announces a new stall once as a Warning event, patches
// the Pipeline's status once and maps the outcome to controller-runtime's
// result: the next poll after the jittered interval.
func (r *Reconciler) finish(ctx context.Context, s *session, patcher *sreconcile.Patcher, res sreconcile.Result, err error) (ctrl.Result, error) {
	obj := s.pipeline
	var before *metav1.Condition
	if c := apimeta.FindStatusCondition(obj.Status.Conditions, sreconcile.StalledCondition); c != nil {
		before = c.DeepCopy()
	}
	err = sreconcile.Escalate(obj.Status.Conditions, obj.Generation, err, r.now(), r.Options.StallAfter)
	if sreconcile.Summarize(&obj.Status.Conditions, obj.Generation, res, err, sreconcile.WithReadyMessage(readyMessage)) {
		obj.Status.ObservedGeneration = obj.Generation
	}
	if sreconcile.NewlyStalled(before, obj.Status.Conditions) {
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, sreconcile.Reason(err), "Reconcile", "%s", err.Error())
	}
	if perr := patcher.Patch(ctx, obj); perr != nil {
		if err == nil || errors.As(err, new(*sreconcile.Stalling)) {
			return ctrl.Result{}, perr
		}
		err = errors.Join(err, perr)
	}
	if err == nil {
		r.requestHandled(obj)
	}
	return sreconcile.ComputeResult(res, err, sreconcile.Schedule{Interval: s.interval})
}

// Interval is how often p polls its repository: spec.interval, by default
// DefaultInterval, and never less than floor (DefaultMinInterval when not
// positive); notificationv1alpha1.HeardSlowdown times that once a Receiver
// has woken p, since pushes then arrive by themselves.
func Interval(p *promotionv1alpha1.Pipeline, floor time.Duration) time.Duration {
	if floor <= 0 {
		floor = DefaultMinInterval
	}
	d := DefaultInterval
	if p.Spec.Interval != nil && p.Spec.Interval.Duration > 0 {
		d = p.Spec.Interval.Duration
	}
	d = max(d, floor)
	if strings.HasPrefix(p.Annotations[shared.ReconcileRequestAnnotation], notificationv1alpha1.WakeRequestPrefix) {
		d *= notificationv1alpha1.HeardSlowdown
	}
	return d
}

// freshPollWanted reports whether p carries a reconcile request
// (shared.ReconcileRequestAnnotation) not answered yet: such a request
// means "look now", so the repository is listed afresh instead of from the
// shared poller's last answer.
func (r *Reconciler) freshPollWanted(p *promotionv1alpha1.Pipeline) bool {
	req := p.Annotations[shared.ReconcileRequestAnnotation]
	if req == "" {
		return false
	}
	last, ok := r.handled.Load(client.ObjectKeyFromObject(p))
	return !ok || last != req
}

// requestHandled records that p's reconcile request has been answered.
func (r *Reconciler) requestHandled(p *promotionv1alpha1.Pipeline) {
	if req := p.Annotations[shared.ReconcileRequestAnnotation]; req != "" {
		r.handled.Store(client.ObjectKeyFromObject(p), req)
	}
}
