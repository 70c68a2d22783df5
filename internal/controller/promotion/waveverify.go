package promotion

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/verify"
)

// verifyWave runs the stage's checks against wave, which has deployed
// (rollout.verifyEachWave), and reports whether they passed, so that the
// next wave may begin. The run is recorded in status.rollout.verification.
// While the checks run it sets the wait for their next measurement; when
// one fails it halts the rollout, and once a Resume has lifted that halt
// the checks run again, as the wave's next attempt. A stage that no longer
// has checks has nothing to run: the wave passes, and a run of the checks
// it had is ended, its Jobs deleted.
func (s *session) verifyWave(ctx context.Context, wave int32) (bool, error) {
	ro := s.p.Status.Rollout
	wv := ro.Verification
	checks := s.checks()
	if len(checks) == 0 {
		if wv != nil && s.endRun(&wv.VerificationStatus, checkRun{wave: wv.Wave, attempt: wv.Attempt}, verify.Succeeded, "the stage no longer has checks: nothing to verify") {
			if err := s.deleteJobs(ctx); err != nil {
				return false, err
			}
		}
		return true, nil
	}
	switch {
	case wv == nil || wv.Wave != wave:
		wv = &promotionv1alpha1.WaveVerification{Wave: wave, Attempt: 1}
	case wv.Phase == verify.Failed:
		// advanceRollout returns while the rollout is halted: this failed
		// run's halt was resumed.
		wv = &promotionv1alpha1.WaveVerification{Wave: wave, Attempt: wv.Attempt + 1}
	case wv.Phase == verify.Succeeded:
		return true, nil
	}
	run := checkRun{wave: wave, attempt: wv.Attempt}
	if wv.Phase == "" {
		start := metav1.NewTime(s.r.prober().begin(s.runKey(run), s.now).Truncate(time.Second))
		wv.Phase, wv.StartTime = verify.Running, &start
		ro.Verification = wv
	}
	wait, doing, err := s.runChecks(ctx, run, checks, &wv.VerificationStatus)
	if err != nil {
		return false, err
	}
	what := fmt.Sprintf("wave %d of release %s in stage %s", wave, s.p.Spec.Release, s.p.Spec.Stage)
	switch wv.Phase {
	case verify.Running:
		s.wait = sreconcile.NewWaiting(ReasonVerifying,
			fmt.Errorf("wave %d of %d deployed; verifying it: %s; %s", wave, ro.Waves, doing, describeCounts(countStates(s.p.Status.Stacks))), wait)
		return false, nil
	case verify.Succeeded:
		s.r.prober().forget(s.runKey(run))
		s.event(corev1.EventTypeNormal, promotionv1alpha1.EventVerificationSucceeded, fmt.Sprintf("%s verified: %s", what, wv.Message))
		return true, nil
	}
	s.r.prober().forget(s.runKey(run))
	s.event(corev1.EventTypeWarning, promotionv1alpha1.EventVerificationFailed, fmt.Sprintf("%s failed verification: %s", what, wv.Message))
	if err := s.deleteJobs(ctx); err != nil {
		return false, err
	}
	s.halt(haltVerification, fmt.Sprintf("the checks of wave %d failed: %s", wave, wv.Message), "")
	s.wait = s.haltedWait()
	return false, nil
}
