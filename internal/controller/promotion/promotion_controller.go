package promotion

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stackyard/stackyard/internal/change"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/metrics"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// What the Promotion controller needs of the API (collected into
// config/rbac/role.yaml by `make generate`). It patches the Stacks it
// promotes (spec.commit only, by server-side apply) and the status of
// Releases, and deletes the promotions retention lets go.
//
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=promotions,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=promotions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=releases/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=stages;pipelines;releases,verbs=get;list;watch
// +kubebuilder:rbac:groups=pulumi.com,resources=stacks,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// FieldManager is the server-side apply field manager that owns the
// spec.commit of a promoted Stack. Argo CD users list it in
// ignoreDifferences.managedFieldsManagers.
const FieldManager = "stackyard-promotion"

// Reconciler reconciles Promotions, Workers at a time, but the promotions
// of one stage one at a time: the decision that a promotion starts relies
// on no other promotion of the stage being decided at the same time.
type Reconciler struct {
	// Client reads (cached) and writes the API.
	Client client.Client
	// APIReader reads the API without the cache: the queue decision is
	// taken on it.
	APIReader client.Reader
	// Recorder emits Kubernetes events on Promotions and Stages.
	Recorder events.EventRecorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Metrics records promotions, approval waits and verification checks;
	// nil records nothing.
	Metrics *metrics.Promotions
	// Admission answers whether the admission policies are in force; a
	// promotion into a gated stage waits while they are not. Nil checks
	// nothing (the operator always sets it).
	Admission *change.AdmissionGuard

	// Workers is how many Promotions (of different stages) are
	// reconciled at once; zero means DefaultWorkers.
	Workers int

	// probes runs the HTTP measurements of verification checks.
	probes *probes
	// stages serializes the reconciles of each stage's promotions.
	stages stageLocks
}

// session is one reconcile of one Promotion: the steps are its methods and
// share what earlier steps learned.
type session struct {
	r   *Reconciler
	p   *promotionv1alpha1.Promotion
	now time.Time

	// stage and release are what the promotion names (reconcileRequest,
	// or the stage alone while Running; nil when it is gone).
	stage   *promotionv1alpha1.Stage
	release *promotionv1alpha1.Release
	// members are the Stacks the stage deploys, named and selected
	// (reconcileRequest, while the promotion is Pending; once it runs,
	// status.stacks records those it pins).
	members change.Membership
	// outcome is the final phase observeStacks found, with its message;
	// releaseFailed says the release itself failed (an update), so that
	// auto-promotion leaves it out of the stage from now on.
	outcome       promotionv1alpha1.PromotionPhase
	message       string
	releaseFailed bool
	// waiting is what observeStacks found the pinned Stacks wait for;
	// wait is the wait advanceRollout decided, returned by awaitRollout
	// once pinStacks has pinned what it marked.
	waiting string
	wait    error
	// releaseFaults counts the failed Stacks whose failure is the
	// release's (observeStacks): a rollout that fails with none fails
	// without recording the release as failed in the stage.
	releaseFaults int
	// obs is what the metrics record once the status is stored.
	obs observations
	// current says p was found to be the Promotion as stored (see
	// session.isCurrent); stale that it was found older than the one
	// stored, so that finish writes nothing from it.
	current, stale bool
	// read is p as this reconcile read it, before any step changed it.
	read *promotionv1alpha1.Promotion
	// recs are the promotion's per-Stack records (records.go).
	recs records
}

// Reconcile moves one Promotion along its lifecycle. The chain is:
//
//	reconcileRequest → reconcileHeldChange → reconcileQueue → reconcileWindow →
//	reconcileAdmission → reconcilePreview → reconcileInputs → reconcilePolicies →
//	reconcileApproval →
//	startPromotion → reconcileInterventions → observeStacks → advanceRollout →
//	pinStacks → awaitRollout → verify → recordOutcome → garbageCollect
//
// finish, in a defer, writes a failure being retried into status.message
// while the promotion is not finished, patches the status once and maps
// the outcome to controller-runtime's result.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	p := &promotionv1alpha1.Promotion{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	// Held until the status is written: the deferred unlock runs after
	// finish's.
	unlock := r.stages.lock(p.Namespace + "/" + p.Spec.Stage)
	defer unlock()
	s := &session{r: r, p: p, read: p.DeepCopy(), now: r.now(), obs: observations{began: p.Status.Phase}}
	patcher := sreconcile.NewPatcher(r.Client, p)
	var (
		res sreconcile.Result
		err error
	)
	defer func() { result, retErr = s.finish(ctx, patcher, res, err) }()

	if p.Status.Phase == "" {
		p.Status.Phase = promotionv1alpha1.PromotionPending
	}
	if err = s.loadRecords(ctx); err != nil {
		err = sreconcile.NewGeneric("", err)
		return
	}
	res, err = sreconcile.Steps{
		{Name: "reconcileRequest", Run: s.reconcileRequest},
		{Name: "reconcileHeldChange", Run: s.reconcileHeldChange},
		{Name: "reconcileQueue", Run: s.reconcileQueue},
		{Name: "reconcileWindow", Run: s.reconcileWindow},
		{Name: "reconcileAdmission", Run: s.reconcileAdmission},
		{Name: "reconcilePreview", Run: s.reconcilePreview},
		{Name: "reconcileInputs", Run: s.reconcileInputs},
		{Name: "reconcilePolicies", Run: s.reconcilePolicies},
		{Name: "reconcileApproval", Run: s.reconcileApproval},
		{Name: "startPromotion", Run: s.startPromotion},
		{Name: "reconcileInterventions", Run: s.reconcileInterventions},
		{Name: "observeStacks", Run: s.observeStacks},
		{Name: "advanceRollout", Run: s.advanceRollout},
		{Name: "pinStacks", Run: s.pinStacks},
		{Name: "awaitRollout", Run: s.awaitRollout},
		{Name: "verify", Run: s.verify},
		{Name: "recordOutcome", Run: s.recordOutcome},
		{Name: "garbageCollect", Run: s.garbageCollect},
	}.Run(ctx)
	return
}

// finish records a failure or a wait in status.message, and its reason
// in status.reason, while the promotion is not finished (a finished one
// never changes), patches the Promotion once and maps the outcome to
// controller-runtime's result. A reconcile that found its copy older than
// the Promotion stored writes nothing, and looks again shortly.
func (s *session) finish(ctx context.Context, patcher *sreconcile.Patcher, res sreconcile.Result, err error) (ctrl.Result, error) {
	if !s.stale {
		// The records first: the status counts and digests them.
		var taken *recordTaken
		switch serr := s.storeRecords(ctx); {
		case errors.Is(serr, errRecordStale):
			s.stale = true
		case (errors.As(serr, &taken) || (serr == nil && errors.As(err, &taken))) && !s.p.Status.Phase.IsFinished():
			// Nobody but the operator may make one (the admission policy
			// stackyard-records): an administrator did. The choke point
			// never reads it, and the promotion cannot record its
			// preview: it fails, naming it, with nothing deployed.
			s.end(promotionv1alpha1.PromotionFailed, taken.Error())
			err = nil
		case (apierrors.IsInvalid(serr) || apierrors.IsForbidden(serr)) && !s.p.Status.Phase.IsFinished():
			// Refused for good: retrying writes nothing, so the promotion
			// ends, saying why, with nothing pinned (records are written
			// only while it is Pending).
			s.end(promotionv1alpha1.PromotionFailed, serr.Error())
			err = nil
		case serr != nil:
			return s.recordsNotStored(ctx, patcher, serr)
		}
	}
	if s.stale {
		// Its status is older than the stored one: a patch from it would
		// put older records back. The next reconcile reads the newer.
		return ctrl.Result{RequeueAfter: cacheLag}, nil
	}
	if err != nil && !s.p.Status.Phase.IsFinished() {
		s.p.Status.Message = sreconcile.Truncate(err.Error(), maxMessage)
		s.p.Status.Reason = sreconcile.Reason(err)
	} else {
		s.p.Status.Reason = ""
	}
	s.countPreviews()
	result, err := sreconcile.ComputeResult(res, err, sreconcile.Schedule{RequeueAfter: storedRequeue})
	if s.observing() {
		// What this reconcile saw end (a check, the promotion) is counted
		// once it is stored: stored only over the status it was decided
		// on, so that a reconcile of a cached copy that was behind, which
		// would decide the same end again, conflicts and counts nothing.
		patcher.Locked()
	}
	if perr := patcher.Patch(ctx, s.p); perr != nil {
		return ctrl.Result{}, errors.Join(err, perr)
	}
	s.observe()
	return result, err
}

// recordsNotStored ends a reconcile whose records could not be stored for
// a while (an API error, or an earlier promotion's records still there):
// the steps' changes must not get ahead of the records they count and
// digest, so only the error is written, as status.message and
// status.reason over the status as read, and only over the status stored
// (a copy that was behind writes nothing). A step's own error comes back
// on the retry.
func (s *session) recordsNotStored(ctx context.Context, patcher *sreconcile.Patcher, serr error) (ctrl.Result, error) {
	result, rerr := sreconcile.ComputeResult(sreconcile.ResultEmpty, serr, sreconcile.Schedule{})
	if s.read.Status.Phase.IsFinished() {
		return result, rerr
	}
	msg := s.read.DeepCopy()
	msg.Status.Message = sreconcile.Truncate(serr.Error(), maxMessage)
	msg.Status.Reason = sreconcile.Reason(serr)
	if perr := patcher.Locked().Patch(ctx, msg); perr != nil && !apierrors.IsConflict(perr) {
		return ctrl.Result{}, errors.Join(rerr, perr)
	}
	return result, rerr
}

// storedRequeue is how soon a promotion whose step asked for its record
// to be stored first (ResultRequeue: the Stacks' previous commits when it
// starts, the Stacks a rollout reached before they are pinned) is looked
// at again. The status patch that stores it is done by then; the
// promotion's own watch ignores status changes, so without this the
// next step would wait for sreconcile.DefaultRequeueAfter, a second per
// wave step (found by the promotion benchmark). A reconcile that reads a
// copy from the cache older than that patch decides the same marks again
// and pins nothing.
const storedRequeue = 100 * time.Millisecond

// maxMessage is the API's limit on status.message.
const maxMessage = 4096

// maxStackMessage is the API's limit on a Stack's message in
// status.stacks, which holds up to a thousand of them.
const maxStackMessage = 256

// pending reports whether the promotion has not started.
func (s *session) pending() bool { return s.p.Status.Phase == promotionv1alpha1.PromotionPending }

// running reports whether the promotion runs.
func (s *session) running() bool { return s.p.Status.Phase == promotionv1alpha1.PromotionRunning }

// end finishes the promotion with phase and msg, and records the event
// that says so on the Promotion and its Stage.
func (s *session) end(phase promotionv1alpha1.PromotionPhase, msg string) {
	st := &s.p.Status
	now := metav1.NewTime(s.now)
	st.Phase, st.Message, st.EndTime = phase, sreconcile.Truncate(msg, maxMessage), &now
	if st.StartTime == nil && phase == promotionv1alpha1.PromotionFailed {
		st.StartTime = &now
	}
	switch phase {
	case promotionv1alpha1.PromotionSucceeded:
		s.event(corev1.EventTypeNormal, promotionv1alpha1.EventPromotionSucceeded, fmt.Sprintf("release %s is in stage %s: %s", s.p.Spec.Release, s.p.Spec.Stage, msg))
	case promotionv1alpha1.PromotionFailed:
		s.event(corev1.EventTypeWarning, promotionv1alpha1.EventPromotionFailed, fmt.Sprintf("release %s failed in stage %s: %s", s.p.Spec.Release, s.p.Spec.Stage, msg))
	default:
		s.event(corev1.EventTypeWarning, promotionv1alpha1.EventPromotionAborted, fmt.Sprintf("promotion of release %s into stage %s aborted: %s", s.p.Spec.Release, s.p.Spec.Stage, msg))
	}
}

// abort ends a Pending promotion as Aborted. It returns no error: the
// refusal is the outcome, recorded in status.
func (s *session) abort(format string, args ...any) (sreconcile.Result, error) {
	s.end(promotionv1alpha1.PromotionAborted, fmt.Sprintf(format, args...))
	return sreconcile.ResultSuccess, nil
}

// event records a Kubernetes event on the Promotion and, when it exists,
// on its Stage.
func (s *session) event(eventType, reason, note string) {
	if s.r.Recorder == nil {
		return
	}
	s.r.Recorder.Eventf(s.p, nil, eventType, reason, "Promote", "%s", note)
	if s.stage != nil {
		s.r.Recorder.Eventf(s.stage, s.p, eventType, reason, "Promote", "%s: %s", s.p.Name, note)
	}
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
