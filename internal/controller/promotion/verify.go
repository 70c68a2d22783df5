package promotion

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/change/policy"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/stackrun"
	"github.com/stackyard/stackyard/internal/verify"
)

// What verification needs besides the rest of the controller: the Jobs of
// Job checks (owned by the Promotion, watched to learn their end), the
// Secrets that HTTP headers read, and creating the rollback Promotion
// under the name "stackyard:auto-promotion", which the admission policy
// allows only with the verb autopromote.
//
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=create;get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=promotions,verbs=create;autopromote

// ReasonVerifying is the reason of the wait of a promotion whose checks
// run.
const ReasonVerifying = "Verifying"

// maxMeasurements is how many measurements of a check status keeps.
const maxMeasurements = 10

// verify runs the stage's checks once every Stack is deployed at the
// release (the built-in verification, which observeStacks waits for), and
// turns their outcome into the promotion's: all passed, and recordOutcome
// records the release verified in the stage; one failed, and the
// promotion fails with the check's message, the release fails in the
// stage (failedIn, so downstream stages, which take only verified
// releases, never get it) and, with rollbackOnFailure, the stage is rolled
// back. Each reconcile takes the measurements that are due, records them
// in status.verification, and waits for the next one: a requeue at its
// time, or the end of a Job or an HTTP call, wakes it. It never sleeps.
func (s *session) verify(ctx context.Context) (sreconcile.Result, error) {
	st := &s.p.Status
	if !s.running() {
		return sreconcile.ResultEmpty, nil
	}
	if s.outcome == promotionv1alpha1.PromotionFailed || s.outcome == promotionv1alpha1.PromotionAborted {
		return sreconcile.ResultEmpty, s.stopVerification(ctx)
	}
	if s.outcome != promotionv1alpha1.PromotionSucceeded {
		return sreconcile.ResultEmpty, nil
	}
	checks := s.checks()
	v := st.Verification
	if v == nil {
		if len(checks) == 0 {
			return sreconcile.ResultEmpty, nil
		}
		start := metav1.NewTime(s.r.prober().begin(s.runKey(checkRun{}), s.now).Truncate(time.Second))
		v = &promotionv1alpha1.VerificationStatus{Phase: verify.Running, StartTime: &start}
		st.Verification = v
	}
	if v.Phase == verify.Running {
		wait, doing, err := s.runChecks(ctx, checkRun{}, checks, v)
		if err != nil {
			return sreconcile.ResultEmpty, err
		}
		if v.Phase == verify.Running {
			return sreconcile.ResultEmpty, sreconcile.NewWaiting(ReasonVerifying, errors.New("verifying: "+doing), wait)
		}
		s.r.prober().forget(s.runKey(checkRun{}))
		if v.Phase == verify.Succeeded {
			s.event(corev1.EventTypeNormal, promotionv1alpha1.EventVerificationSucceeded, fmt.Sprintf("release %s verified in stage %s: %s", s.p.Spec.Release, s.p.Spec.Stage, v.Message))
		} else {
			s.event(corev1.EventTypeWarning, promotionv1alpha1.EventVerificationFailed, fmt.Sprintf("release %s failed verification in stage %s: %s", s.p.Spec.Release, s.p.Spec.Stage, v.Message))
		}
	}
	if v.Phase == verify.Succeeded {
		s.message = fmt.Sprintf("%s; %s", s.message, v.Message)
		return sreconcile.ResultEmpty, nil
	}
	s.outcome, s.message, s.releaseFailed = promotionv1alpha1.PromotionFailed, "verification failed: "+v.Message, true
	if err := s.deleteJobs(ctx); err != nil {
		return sreconcile.ResultEmpty, err
	}
	return s.rollback(ctx, v.Message)
}

// checks returns the stage's checks; none for a preview-only stage, which
// deploys nothing to verify, or when the stage is gone.
func (s *session) checks() []promotionv1alpha1.VerificationCheck {
	if s.stage == nil || s.stage.Spec.PreviewOnly || s.stage.Spec.Verification == nil {
		return nil
	}
	return s.stage.Spec.Verification.Checks
}

// stopVerification ends checks that still run when the promotion fails
// or is aborted otherwise (a Stack failed meanwhile), the promotion's or
// a wave's: their Jobs are deleted, their results forgotten.
func (s *session) stopVerification(ctx context.Context) error {
	stopped := s.endRun(s.p.Status.Verification, checkRun{}, verify.Failed, "stopped: "+s.message)
	if ro := s.p.Status.Rollout; ro != nil && ro.Verification != nil {
		wv := ro.Verification
		stopped = s.endRun(&wv.VerificationStatus, checkRun{wave: wv.Wave, attempt: wv.Attempt}, verify.Failed, "stopped: "+s.message) || stopped
	}
	if !stopped {
		return nil
	}
	return s.deleteJobs(ctx)
}

// endRun ends v, the status of run, with phase and msg and forgets its
// measurements, if it is Running; it reports whether it was. The caller
// deletes the Jobs that still run.
func (s *session) endRun(v *promotionv1alpha1.VerificationStatus, run checkRun, phase, msg string) bool {
	if v == nil || v.Phase != verify.Running {
		return false
	}
	v.Phase, v.Message = phase, msg
	s.r.prober().forget(s.runKey(run))
	return true
}

// runKey names run among the runs of checks of every promotion.
func (s *session) runKey(run checkRun) runKey { return runKey{promotion: s.p.UID, checkRun: run} }

// runChecks takes the due measurements of the checks that run, and
// settles v's phase: Failed at the first failed check, Succeeded once all
// passed. While some run, it returns how long until the next is due (or
// how long to wait for one that is being taken), and what they do.
func (s *session) runChecks(ctx context.Context, run checkRun, checks []promotionv1alpha1.VerificationCheck, v *promotionv1alpha1.VerificationStatus) (time.Duration, string, error) {
	var (
		wait  time.Duration
		doing []string
	)
	for i := range checks {
		c := &checks[i]
		cs := checkStatus(v, c.Name)
		if cs.Phase == verify.Running {
			next, what, err := s.runCheck(ctx, run, c, cs, v.StartTime.Time)
			if err != nil {
				return 0, "", err
			}
			if cs.Phase == verify.Running {
				if wait == 0 || next < wait {
					wait = next
				}
				doing = append(doing, fmt.Sprintf("check %s: %s", c.Name, what))
			} else {
				s.obs.checks = append(s.obs.checks, checkOutcome{check: c.Name, passed: cs.Phase == verify.Succeeded})
			}
		}
		if cs.Phase == verify.Failed {
			v.Phase, v.Message = verify.Failed, sreconcile.Truncate(fmt.Sprintf("check %s failed: %s", c.Name, failure(c, cs)), maxMessage)
			return 0, "", nil
		}
	}
	if len(doing) == 0 {
		v.Phase, v.Message = verify.Succeeded, fmt.Sprintf("%d verification checks passed", len(checks))
		if len(checks) == 1 {
			v.Message = fmt.Sprintf("verification check %s passed", checks[0].Name)
		}
		return 0, "", nil
	}
	return wait, strings.Join(doing, "; "), nil
}

// runCheck takes the measurement of c that is due, if one is, records it
// in cs and assesses the check. While the check runs it returns when to
// look again and what the check does.
func (s *session) runCheck(ctx context.Context, run checkRun, c *promotionv1alpha1.VerificationCheck, cs *promotionv1alpha1.CheckStatus, start time.Time) (time.Duration, string, error) {
	policy := policyOf(c)
	taken := cs.Successes + cs.Failures
	due := ceilSecond(policy.Next(start, lastTime(cs)))
	if s.now.Before(due) {
		return due.Sub(s.now), fmt.Sprintf("measurement %d of %d at %s", taken+1, max(c.Count, 1), due.UTC().Format(time.RFC3339)), nil
	}
	// A measurement is taken from the API or an endpoint, then stored
	// with the status: decided on a cached copy that is behind the status
	// the last reconcile stored, it would be one that was taken already,
	// taken again, and its patch would conflict or overwrite the other.
	if current, err := s.isCurrent(ctx); err != nil {
		return 0, "", err
	} else if !current {
		return cacheLag, fmt.Sprintf("measurement %d of %d: waiting for the operator's cache to catch up", taken+1, max(c.Count, 1)), nil
	}
	var (
		got measured
		err error
	)
	if c.Job != nil {
		got, err = s.measureJob(ctx, run, c, taken+1)
	} else if c.HTTP != nil {
		got, err = s.measureHTTP(ctx, run, c, taken+1)
	} else {
		got = s.measuredNow(verify.Error, "", "the check sets neither http nor job", true)
	}
	if err != nil {
		return 0, "", err
	}
	if got.m == nil {
		return got.wait, fmt.Sprintf("measurement %d of %d: %s", taken+1, max(c.Count, 1), got.doing), nil
	}
	record(cs, *got.m)
	cs.Phase = policy.Assess(cs.Successes, cs.Failures)
	if got.final {
		cs.Phase = verify.Failed
	}
	if cs.Phase != verify.Running {
		return 0, "", nil
	}
	next := ceilSecond(policy.Next(start, lastTime(cs)))
	return max(next.Sub(s.now), 10*time.Millisecond), fmt.Sprintf("measurement %d of %d at %s", taken+2, max(c.Count, 1), next.UTC().Format(time.RFC3339)), nil
}

// cacheLag is how long a reconcile whose cached Promotion is behind waits
// for the cache before it looks again.
const cacheLag = 100 * time.Millisecond

// isCurrent reports whether the Promotion this reconcile decides on is
// the one stored, read once per reconcile without the cache.
func (s *session) isCurrent(ctx context.Context) (bool, error) {
	if s.current {
		return true, nil
	}
	stale, err := stackrun.Stale(ctx, s.r.APIReader, s.p)
	if err != nil {
		return false, fmt.Errorf("reading promotion %s: %w", s.p.Name, err)
	}
	s.current = !stale
	return s.current, nil
}

// policyOf is how check c schedules and counts.
func policyOf(c *promotionv1alpha1.VerificationCheck) verify.Policy {
	p := verify.Policy{Count: c.Count, FailureLimit: c.FailureLimit}
	if c.InitialDelay != nil {
		p.InitialDelay = c.InitialDelay.Duration
	}
	if c.Interval != nil {
		p.Interval = c.Interval.Duration
	}
	return p
}

// checkStatus returns the status of the check named name in v, adding a
// Running one when there is none.
func checkStatus(v *promotionv1alpha1.VerificationStatus, name string) *promotionv1alpha1.CheckStatus {
	for i := range v.Checks {
		if v.Checks[i].Name == name {
			return &v.Checks[i]
		}
	}
	v.Checks = append(v.Checks, promotionv1alpha1.CheckStatus{Name: name, Phase: verify.Running})
	return &v.Checks[len(v.Checks)-1]
}

// record adds m to cs: its counts, and its list of the last measurements.
// An Error counts as a failure (there is no separate error limit).
func record(cs *promotionv1alpha1.CheckStatus, m promotionv1alpha1.Measurement) {
	if m.Phase == verify.Successful {
		cs.Successes++
	} else {
		cs.Failures++
	}
	cs.Measurements = append(cs.Measurements, m)
	if n := len(cs.Measurements); n > maxMeasurements {
		cs.Measurements = cs.Measurements[n-maxMeasurements:]
	}
}

// lastTime is when cs's last measurement was taken, nil before the first.
func lastTime(cs *promotionv1alpha1.CheckStatus) *time.Time {
	if cs.Successes+cs.Failures == 0 || len(cs.Measurements) == 0 {
		return nil
	}
	t := cs.Measurements[len(cs.Measurements)-1].Time.Time
	return &t
}

// ceilSecond rounds t up to a whole second. Status keeps times to the
// second; measuring at whole seconds makes the recorded times what the
// schedule computed, so that an interval is never shorter, by the
// recorded times or the real ones, than asked.
func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); r.Before(t) {
		return r.Add(time.Second)
	}
	return t
}

// failure says why check c failed, from its last measurement.
func failure(c *promotionv1alpha1.VerificationCheck, cs *promotionv1alpha1.CheckStatus) string {
	msg := fmt.Sprintf("%d of %d measurements failed (failureLimit %d)", cs.Failures, cs.Successes+cs.Failures, c.FailureLimit)
	if n := len(cs.Measurements); n > 0 {
		last := cs.Measurements[n-1]
		msg += "; last: " + last.Phase
		if last.Value != "" {
			msg += ", value " + last.Value
		}
		if last.Message != "" {
			msg += ": " + last.Message
		}
	}
	return msg
}

// rollback asks, when the stage wants it, for the promotion of the release
// verified last in the stage, as an automatic rollback: a Promotion like
// any other (previewed; approved unless the stage's approval policy skips
// rollbacks), named after the failed promotion so that a reconcile run
// again finds it instead of asking twice. A failed rollback is not rolled
// back in turn: a person decides.
func (s *session) rollback(ctx context.Context, why string) (sreconcile.Result, error) {
	if s.stage == nil || s.stage.Spec.Verification == nil || !s.stage.Spec.Verification.RollbackOnFailure {
		return sreconcile.ResultEmpty, nil
	}
	if s.p.Spec.Rollback {
		s.message += "; this rollback is not rolled back in turn"
		return sreconcile.ResultEmpty, nil
	}
	target, err := s.rollbackTarget(ctx)
	if err != nil {
		return sreconcile.ResultEmpty, err
	}
	if target == nil {
		s.message += fmt.Sprintf("; no other release was verified in stage %s to roll back to", s.p.Spec.Stage)
		return sreconcile.ResultEmpty, nil
	}
	name := RollbackName(s.p.Spec.Stage, s.p.Name)
	p := &promotionv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: s.p.Namespace,
			Labels: map[string]string{promotionv1alpha1.PipelineLabel: s.stage.Spec.Pipeline, promotionv1alpha1.StageLabel: s.p.Spec.Stage},
		},
		Spec: promotionv1alpha1.PromotionSpec{
			Stage: s.p.Spec.Stage, Release: target.Name, Rollback: true,
			RequestedBy: promotionv1alpha1.RequestedByAutoPromotion,
			Reason:      sreconcile.Truncate(fmt.Sprintf("verification of %s failed: %s", s.p.Name, why), 1024),
		},
	}
	switch err := s.r.Client.Create(ctx, p); {
	case apierrors.IsAlreadyExists(err):
	case err != nil:
		return sreconcile.ResultEmpty, sreconcile.NewGeneric("", fmt.Errorf("asking for rollback %s to release %s: %w", name, target.Name, err))
	default:
		s.event(corev1.EventTypeWarning, promotionv1alpha1.EventRollbackRequested, fmt.Sprintf("asked for rollback %s of stage %s to release %s", name, s.p.Spec.Stage, target.Name))
	}
	s.message += fmt.Sprintf("; rolling back to release %s (promotion %s)", target.Name, name)
	return sreconcile.ResultEmpty, nil
}

// rollbackTarget is the release of the stage's pipeline, other than the
// one promoted, that was verified in the stage last and has not failed
// there since; nil when there is none.
func (s *session) rollbackTarget(ctx context.Context) (*promotionv1alpha1.Release, error) {
	releases, err := change.ListReleases(ctx, s.r.Client, s.p.Namespace, s.stage.Spec.Pipeline)
	if err != nil {
		return nil, sreconcile.NewGeneric("", err)
	}
	var (
		best          *promotionv1alpha1.Release
		verifiedSince metav1.Time
	)
	for i := range releases {
		r := &releases[i]
		v, ok := r.Status.VerifiedIn[s.p.Spec.Stage]
		if !ok || r.Name == s.p.Spec.Release {
			continue
		}
		if f, failed := r.Status.FailedIn[s.p.Spec.Stage]; failed && !f.Since.Before(&v.Since) {
			continue
		}
		if best == nil || verifiedSince.Before(&v.Since) {
			best, verifiedSince = r, v.Since
		}
	}
	return best, nil
}

// RollbackName is the name of the rollback Promotion a failed
// verification of promotion into stage asks for: the stage's name and a
// digest of the failed promotion's, so asking again finds the same one.
func RollbackName(stage, promotion string) string {
	h := sha256.Sum256([]byte(promotion))
	return stage + "-rollback-" + hex.EncodeToString(h[:])[:10]
}

// observations are what a reconcile saw happen, for the metrics, which
// are recorded only once the Promotion's status holding it is stored.
type observations struct {
	// began is the promotion's phase when the reconcile began.
	began promotionv1alpha1.PromotionPhase
	// checks are the checks that ended.
	checks []checkOutcome
	// halts are the causes of the halts this reconcile began.
	halts []haltCause
}

// checkOutcome is one check that ended.
type checkOutcome struct {
	check  string
	passed bool
}

// began is the promotion's phase when the reconcile began.
func (s *session) began() promotionv1alpha1.PromotionPhase {
	if s.obs.began == "" {
		return promotionv1alpha1.PromotionPending
	}
	return s.obs.began
}

// ended reports whether this reconcile finished the promotion.
func (s *session) ended() bool { return s.p.Status.Phase.IsFinished() && !s.began().IsFinished() }

// started reports whether this reconcile started the promotion.
func (s *session) started() bool {
	return s.began() == promotionv1alpha1.PromotionPending && s.p.Status.Phase == promotionv1alpha1.PromotionRunning && s.p.Status.StartTime != nil
}

// observing reports whether this reconcile has something for observe to
// count once its status is stored.
func (s *session) observing() bool {
	return s.ended() || s.started() || len(s.obs.checks) > 0 || len(s.obs.halts) > 0
}

// observe records the metrics of what this reconcile stored: the end of
// the promotion (and of its rollout, in waves), its start (the wait for
// approvals, on a stage that requires them), the checks that ended, and
// the halts that began.
func (s *session) observe() {
	m, p := s.r.Metrics, s.p
	ns, stageName, phase := p.Namespace, p.Spec.Stage, p.Status.Phase
	if s.ended() {
		m.ObservePromotion(ns, stageName, strings.ToLower(string(phase)))
		if p.Status.Rollout != nil && p.Status.StartTime != nil && p.Status.EndTime != nil && p.Status.Rollout.Waves > 1 {
			m.ObserveRollout(ns, stageName, strings.ToLower(string(phase)), p.Status.EndTime.Sub(p.Status.StartTime.Time))
		}
	}
	for _, cause := range s.obs.halts {
		m.ObserveHalt(ns, stageName, string(cause))
	}
	s.obs.halts = nil
	if s.started() && s.awaitedApproval() {
		m.ObserveApprovalWait(ns, stageName, p.Status.StartTime.Sub(p.CreationTimestamp.Time))
	}
	for _, c := range s.obs.checks {
		result := "failed"
		if c.passed {
			result = "passed"
		}
		m.ObserveCheck(ns, stageName, c.check, result)
	}
	s.obs.checks = nil
}

// awaitedApproval reports whether the promotion had to be approved before
// it started, as reconcileApproval decides (approvalRequired): its stage,
// or a policy rule that fired, requires approvals, and it is not an
// automatic rollback the stage lets skip them.
func (s *session) awaitedApproval() bool {
	if s.stage == nil {
		return false
	}
	return approvalRequired(s.stage, s.p, policy.Approvals(s.p.Status.Policies))
}
