package stage

import (
	"context"
	"errors"
	"time"

	"github.com/stackyard/stackyard/internal/change"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/schedule"
)

// What the Stage controller needs of the API (collected into
// config/rbac/role.yaml by `make generate`). It creates Promotions in the
// name of auto-promotion, which the admission policy in config/policy
// allows only to a caller with the verb "autopromote" on promotions.
//
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=stages,verbs=get;list;watch
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=stages/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=pipelines;releases,verbs=get;list;watch
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=promotions,verbs=get;list;watch;create;autopromote
// +kubebuilder:rbac:groups=pulumi.com,resources=stacks,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// readyMessage is the Ready message of a Stage whose references are in
// place; what it waits for is in status.waitingFor.
const readyMessage = "the stage's pipeline, stacks and upstream stages are in place"

// EventAutoPromotion is the reason of the event that records a promotion
// auto-promotion asked for.
const EventAutoPromotion = "AutoPromotion"

// Reconciler reconciles Stages.
type Reconciler struct {
	// Client reads and writes the API (cached reads).
	Client client.Client
	// Recorder emits Kubernetes events on Stages.
	Recorder events.EventRecorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// StallAfter is how long a missing reference may be waited for before
	// the Stage is Stalled; zero means sreconcile.DefaultStallAfter.
	StallAfter time.Duration
	// Admission answers whether the admission policies are in force; a
	// gated stage says so while they are not. Nil checks nothing.
	Admission *change.AdmissionGuard
}

// session is one reconcile of one Stage: the steps are its methods and
// share what earlier steps learned.
type session struct {
	r     *Reconciler
	stage *promotionv1alpha1.Stage
	now   time.Time

	// storedRelease is the release the stage's stored status says it runs,
	// before this reconcile (which may move it) patches the status.
	storedRelease string
	// members are the Stacks the stage deploys, named and selected
	// (reconcileHealth).
	members change.Membership
	// stacks are the member Stacks found, by name, and stackErrs why the
	// others could not be read (reconcileHealth).
	stacks    map[string]*pulumiv1.Stack
	stackErrs map[string]error
	// releases are the pipeline's Releases (observePromotions).
	releases []promotionv1alpha1.Release
	// active is the stage's Running promotion, else its newest Pending
	// one (observePromotions).
	active *promotionv1alpha1.Promotion
	// promotions are the stage's Promotions, by name (observePromotions).
	promotions map[string]*promotionv1alpha1.Promotion
	// windows are the promotion windows (reconcileReferences).
	windows []schedule.Window
	// pick is the release auto-promotion promotes (reconcileAvailability).
	pick *promotionv1alpha1.Release
	// wakeAt is when the stage must be looked at again: a soak ends or a
	// window opens.
	wakeAt time.Time
}

// Reconcile brings one Stage's status up to date and asks for the
// promotion auto-promotion calls for. The chain is:
//
//	observePromotions → reconcileHealth → reconcileReferences →
//	reconcileAdmission → reconcileAvailability → reconcileAutoPromotion →
//	reconcileHeldChanges
//
// finish, in a defer, turns the outcome into conditions, patches the
// status once and maps the outcome to controller-runtime's result.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	stage := &promotionv1alpha1.Stage{}
	if err := r.Client.Get(ctx, req.NamespacedName, stage); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !stage.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	s := &session{r: r, stage: stage, now: r.now()}
	if cur := stage.Status.CurrentRelease; cur != nil {
		s.storedRelease = cur.Name
	}
	patcher := sreconcile.NewPatcher(r.Client, stage)
	var (
		res sreconcile.Result
		err error
	)
	defer func() { result, retErr = s.finish(ctx, patcher, res, err) }()

	res, err = sreconcile.Steps{
		{Name: "observePromotions", Run: s.observePromotions},
		{Name: "reconcileHealth", Run: s.reconcileHealth},
		{Name: "reconcileReferences", Run: s.reconcileReferences},
		{Name: "reconcileAdmission", Run: s.reconcileAdmission},
		{Name: "reconcileAvailability", Run: s.reconcileAvailability},
		{Name: "reconcileAutoPromotion", Run: s.reconcileAutoPromotion},
		{Name: "reconcileHeldChanges", Run: s.reconcileHeldChanges},
	}.Run(ctx)
	return
}

// finish summarizes the outcome (a missing reference that lasts longer
// than the stall bound as a stall), records what the stage waits for when
// a step failed, announces a new stall once as a Warning event, patches the
// status once, and asks to be woken when a soak ends or a window opens.
func (s *session) finish(ctx context.Context, patcher *sreconcile.Patcher, res sreconcile.Result, err error) (ctrl.Result, error) {
	st := &s.stage.Status
	err = sreconcile.Escalate(st.Conditions, s.stage.Generation, err, s.now, s.r.StallAfter)
	before := apimeta.FindStatusCondition(st.Conditions, sreconcile.StalledCondition)
	if before != nil {
		before = before.DeepCopy()
	}
	if err != nil {
		st.WaitingFor = err.Error()
	}
	if sreconcile.Summarize(&st.Conditions, s.stage.Generation, res, err, sreconcile.WithReadyMessage(readyMessage)) {
		st.ObservedGeneration = s.stage.Generation
	}
	if sreconcile.NewlyStalled(before, st.Conditions) {
		s.event(nil, corev1.EventTypeWarning, sreconcile.Reason(err), err.Error())
	}
	// No jitter: the wake-up is an instant, a second past it as
	// timestamps are recorded to the second.
	sched := sreconcile.Schedule{JitterFraction: -1}
	if !s.wakeAt.IsZero() {
		sched.Interval = max(s.wakeAt.Sub(s.now), 0) + time.Second
	}
	result, err := sreconcile.ComputeResult(res, err, sched)
	if perr := patcher.Patch(ctx, s.stage); perr != nil {
		return ctrl.Result{}, errors.Join(err, perr)
	}
	return result, err
}

// event records a Kubernetes event on the Stage, related to obj when set.
func (s *session) event(related client.Object, eventType, reason, note string) {
	if s.r.Recorder != nil {
		s.r.Recorder.Eventf(s.stage, related, eventType, reason, "Reconcile", "%s", note)
	}
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
