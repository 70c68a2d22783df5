package promotion

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/verify"
)

// TestVerifyEachWave follows a rollout of two waves whose stage checks
// each wave with a Job, through the reconciles that advance it:
//
//  1. wave 1 has deployed: its check's Job is made, labelled with the
//     wave, and tells its containers the promotion and the wave; wave 2
//     waits, Pending;
//  2. the Job fails: the rollout halts (the checks of wave 1 failed), its
//     Jobs still running are deleted, and wave 2 is still not reached;
//  3. a Resume lifts the halt: the checks run again as attempt 2, with a
//     Job of another name (the failed one is not read again);
//  4. that Job completes: the run passes and wave 2 begins.
func TestVerifyEachWave(t *testing.T) {
	f := newVerifyFixture(t, promotionv1alpha1.Verification{Checks: []promotionv1alpha1.VerificationCheck{{
		Name: "fleet", Job: &promotionv1alpha1.JobCheck{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "check", Image: "busybox",
				Env: []corev1.EnvVar{{Name: "STACKYARD_WAVE", Value: "the check's own"}}}},
		}}}},
	}}})
	ctx := context.Background()
	rollout := &promotionv1alpha1.Rollout{Waves: []intstr.IntOrString{intstr.FromInt32(1)}, VerifyEachWave: true}
	f.stage.Spec.Rollout = rollout
	f.p.Status.Stacks = []promotionv1alpha1.PromotedStack{
		{Name: "a", Wave: 1, State: promotionv1alpha1.StackSucceeded},
		{Name: "b", Wave: 2, State: promotionv1alpha1.StackPending},
	}
	f.p.Status.Rollout = &promotionv1alpha1.RolloutStatus{Spec: rollout.DeepCopy(), Waves: 2, Wave: 1}

	advance := func() (*session, error) {
		t.Helper()
		s := &session{r: f.r, p: f.p, now: f.clock.now, stage: f.stage}
		if _, err := s.advanceRollout(ctx); err != nil {
			t.Fatalf("advanceRollout: %v", err)
		}
		return s, s.wait
	}
	reason := func(err error) string {
		var w *sreconcile.Waiting
		if !errors.As(err, &w) {
			return ""
		}
		return w.Reason
	}
	ro := f.p.Status.Rollout
	stateOfB := func() promotionv1alpha1.RolloutStackState { return f.p.Status.Stacks[1].State }
	job := func(run checkRun) *batchv1.Job {
		t.Helper()
		job := &batchv1.Job{}
		if err := f.r.Client.Get(ctx, client.ObjectKey{Namespace: f.p.Namespace, Name: jobName(f.p.Name, run, "fleet", 1)}, job); err != nil {
			t.Fatalf("the Job of %+v: %v", run, err)
		}
		return job
	}

	// 1. Wave 1 is checked; wave 2 waits.
	if _, wait := advance(); reason(wait) != ReasonVerifying || !strings.Contains(wait.Error(), "wave 1 of 2 deployed; verifying it: check fleet") {
		t.Fatalf("wave 1 deployed: wait %v", wait)
	}
	if wv := ro.Verification; wv == nil || wv.Wave != 1 || wv.Attempt != 1 || wv.Phase != verify.Running {
		t.Fatalf("status.rollout.verification = %+v", wv)
	}
	first := job(checkRun{wave: 1, attempt: 1})
	if first.Labels[WaveLabel] != "1" {
		t.Errorf("labels %v", first.Labels)
	}
	env := first.Spec.Template.Spec.Containers[0].Env
	if want := []corev1.EnvVar{{Name: "STACKYARD_WAVE", Value: "the check's own"}, {Name: "STACKYARD_PROMOTION", Value: f.p.Name}}; !equalEnv(env, want) {
		t.Errorf("env %+v, want %+v", env, want)
	}
	if stateOfB() != promotionv1alpha1.StackPending || ro.Wave != 1 {
		t.Fatalf("wave 2 began before wave 1 was verified: %s, wave %d", stateOfB(), ro.Wave)
	}

	// 2. The Job fails: the rollout halts in wave 1.
	failJob(t, f, first)
	f.clock.now = f.clock.now.Add(time.Minute)
	if s, wait := advance(); reason(wait) != promotionv1alpha1.PromotionReasonHalted || len(s.obs.halts) != 1 || s.obs.halts[0] != haltVerification {
		t.Fatalf("after the failed Job: wait %v, halts %v", wait, s.obs.halts)
	}
	if !strings.HasPrefix(ro.Halted, "the checks of wave 1 failed: check fleet failed: 1 of 1 measurements failed") || ro.Verification.Phase != verify.Failed {
		t.Fatalf("halted %q, verification %+v", ro.Halted, ro.Verification)
	}
	if stateOfB() != promotionv1alpha1.StackPending {
		t.Fatalf("wave 2 began after its checks failed: %s", stateOfB())
	}
	// Halted, it stays so: nothing is measured again.
	if _, wait := advance(); reason(wait) != promotionv1alpha1.PromotionReasonHalted || ro.Verification.Attempt != 1 {
		t.Fatalf("halted: wait %v, attempt %d", wait, ro.Verification.Attempt)
	}

	// 3. Resumed (the Intervention lifts the halt): the checks run again.
	ro.Halted = ""
	if _, wait := advance(); reason(wait) != ReasonVerifying || ro.Verification.Attempt != 2 || ro.Verification.Phase != verify.Running {
		t.Fatalf("resumed: wait %v, verification %+v", wait, ro.Verification)
	}
	second := job(checkRun{wave: 1, attempt: 2})
	if second.Name == first.Name {
		t.Fatalf("attempt 2 reads attempt 1's Job %s", first.Name)
	}

	// 4. It completes: wave 2 begins.
	completeJob(t, f, second)
	f.clock.now = f.clock.now.Add(time.Minute)
	if _, err := advance(); err != nil {
		t.Fatalf("after the checks passed: %v", err)
	}
	if ro.Verification.Phase != verify.Succeeded || ro.Wave != 2 || stateOfB() != promotionv1alpha1.StackUpdating {
		t.Fatalf("verification %+v, wave %d, b %s: want Succeeded, 2, Updating", ro.Verification, ro.Wave, stateOfB())
	}
	// The last wave's checks are the promotion's verification, not a
	// wave's: once b has deployed the rollout succeeds without another run.
	f.p.Status.Stacks[1].State = promotionv1alpha1.StackSucceeded
	if s, _ := advance(); s.outcome != promotionv1alpha1.PromotionSucceeded || ro.Verification.Wave != 1 {
		t.Fatalf("after the last wave: outcome %q, verification %+v", s.outcome, ro.Verification)
	}
}

// equalEnv reports whether two environments are the same list.
func equalEnv(a, b []corev1.EnvVar) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Value != b[i].Value {
			return false
		}
	}
	return true
}

// failJob records job as failed, as the Job controller does: the API
// server wants a start time and FailureTarget before Failed.
func failJob(t *testing.T, f *verifyFixture, job *batchv1.Job) {
	t.Helper()
	started := metav1.NewTime(f.clock.now.Add(-time.Minute))
	job.Status.StartTime, job.Status.Failed = &started, 1
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"},
	}
	if err := f.r.Client.Status().Update(context.Background(), job); err != nil {
		t.Fatal(err)
	}
}

// completeJob records job as complete, as the Job controller does.
func completeJob(t *testing.T, f *verifyFixture, job *batchv1.Job) {
	t.Helper()
	started, done := metav1.NewTime(f.clock.now.Add(-time.Minute)), metav1.NewTime(f.clock.now)
	job.Status.StartTime, job.Status.CompletionTime, job.Status.Succeeded = &started, &done, 1
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached"},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached"},
	}
	if err := f.r.Client.Status().Update(context.Background(), job); err != nil {
		t.Fatal(err)
	}
}

// TestWaveApprovalCountsLaterDecisions: a wave's approval counts only
// when it was given once the wave began to wait, so that its approvers
// decided on what the waves before it did: one given before does not
// count, one given after does, and the wave begins.
func TestWaveApprovalCountsLaterDecisions(t *testing.T) {
	f := newVerifyFixture(t, promotionv1alpha1.Verification{})
	ctx := context.Background()
	rollout := &promotionv1alpha1.Rollout{Waves: []intstr.IntOrString{intstr.FromInt32(1)}, ApproveEachWave: true}
	f.stage.Spec.Rollout, f.stage.Spec.Approval = rollout, &promotionv1alpha1.ApprovalPolicy{Required: 1}
	f.p.Status.PlanDigest = "sha256:plan"
	f.p.Status.Stacks = []promotionv1alpha1.PromotedStack{
		{Name: "a", Wave: 1, State: promotionv1alpha1.StackSucceeded},
		{Name: "b", Wave: 2, State: promotionv1alpha1.StackPending},
	}
	f.p.Status.Rollout = &promotionv1alpha1.RolloutStatus{Spec: rollout.DeepCopy(), Waves: 2, Wave: 1, ApprovalPolicy: f.stage.Spec.Approval.DeepCopy()}
	// The stage's policy now is not the one the promotion recorded.
	f.stage.Spec.Approval = nil
	approveWave2 := func(name string) {
		t.Helper()
		a := &promotionv1alpha1.Approval{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.p.Namespace, Name: name},
			Spec: promotionv1alpha1.ApprovalSpec{Promotion: f.p.Name, Stage: "qa", PlanDigest: "sha256:plan", Wave: 2,
				Decision: promotionv1alpha1.Approve, User: name},
		}
		if err := f.r.Client.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	advance := func(now time.Time) error {
		t.Helper()
		s := &session{r: f.r, p: f.p, now: now, stage: f.stage}
		if _, err := s.advanceRollout(ctx); err != nil {
			t.Fatalf("advanceRollout: %v", err)
		}
		return s.wait
	}

	approveWave2("early")
	// The wave begins to wait a little after early's approval.
	waitFrom := time.Now().Add(2 * time.Second)
	wait := advance(waitFrom)
	var w *sreconcile.Waiting
	if !errors.As(wait, &w) || w.Reason != promotionv1alpha1.PromotionReasonAwaitingApproval {
		t.Fatalf("wave 2 waits: %v", wait)
	}
	a := f.p.Status.Rollout.Approval
	if a == nil || a.Wave != 2 || len(a.Approvals) != 0 || a.ApprovedTime != nil || f.p.Status.Stacks[1].State != promotionv1alpha1.StackPending {
		t.Fatalf("an approval given before the wave waited counted: %+v", a)
	}
	if !strings.Contains(wait.Error(), "wave 2 of 2 waiting for approval: 0 of 1") {
		t.Errorf("message %q", wait.Error())
	}
	// The approval left out is not left out silently.
	if !strings.Contains(wait.Error(), "(1 approval(s) of this wave made before it began to wait at "+
		waitFrom.UTC().Truncate(time.Second).Format(time.RFC3339)+" do not count: approve it again)") {
		t.Errorf("message %q does not say an early approval does not count", wait.Error())
	}

	// Given once the wave waits, an approval counts.
	time.Sleep(time.Until(waitFrom.Truncate(time.Second).Add(time.Second)))
	approveWave2("late")
	if err := advance(time.Now()); err != nil {
		t.Fatalf("after the approval: %v", err)
	}
	if a.ApprovedTime == nil || len(a.Approvals) != 1 || a.Approvals[0].User != "late" || f.p.Status.Rollout.Wave != 2 || f.p.Status.Stacks[1].State != promotionv1alpha1.StackUpdating {
		t.Fatalf("approval %+v, wave %d, b %s", a, f.p.Status.Rollout.Wave, f.p.Status.Stacks[1].State)
	}
}

// TestHaltedWait: a halted promotion says where it stopped: the wave of
// its rollout, or, into a stage without waves (halted by a person), no
// wave at all.
func TestHaltedWait(t *testing.T) {
	for _, tt := range []struct {
		name string
		spec *promotionv1alpha1.Rollout
		want string
	}{
		{"in waves", &promotionv1alpha1.Rollout{}, "rollout halted in wave 2 of 3: halted by ada: quota; 1 succeeded, 0 failed, 1 updating, 0 pending, 0 skipped"},
		{"without waves", nil, "halted: halted by ada: quota; 1 succeeded, 0 failed, 1 updating, 0 pending, 0 skipped"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &promotionv1alpha1.Promotion{}
			p.Status.Phase = promotionv1alpha1.PromotionRunning
			p.Status.Stacks = []promotionv1alpha1.PromotedStack{
				{Name: "a", Wave: 1, State: promotionv1alpha1.StackSucceeded},
				{Name: "b", Wave: 2, State: promotionv1alpha1.StackUpdating},
			}
			p.Status.Rollout = &promotionv1alpha1.RolloutStatus{Spec: tt.spec, Waves: 3, Wave: 2, Halted: "halted by ada: quota"}
			s := &session{r: &Reconciler{}, p: p}
			if _, err := s.advanceRollout(context.Background()); err != nil {
				t.Fatal(err)
			}
			var w *sreconcile.Waiting
			if !errors.As(s.wait, &w) || w.Reason != promotionv1alpha1.PromotionReasonHalted || s.wait.Error() != tt.want {
				t.Errorf("wait %v, want %q (Halted)", s.wait, tt.want)
			}
		})
	}
}

// TestWaveApprovalCases: the other ways a wave's approval ends, each on a
// rollout whose wave 1 has deployed:
//   - a rejection counts whenever it was made, even before the wave
//     waited, and aborts the promotion there;
//   - an automatic rollback goes on without approvals where the recorded
//     policy skips rollbacks';
//   - with no policy recorded, the wave waits rather than go on.
func TestWaveApprovalCases(t *testing.T) {
	for _, tt := range []struct {
		name     string
		policy   *promotionv1alpha1.ApprovalPolicy
		rollback bool
		reject   bool
		// want: "begins", "aborted" or "waits".
		want string
	}{
		{name: "an early rejection", policy: &promotionv1alpha1.ApprovalPolicy{Required: 1}, reject: true, want: "aborted"},
		{name: "an automatic rollback skips them", policy: &promotionv1alpha1.ApprovalPolicy{Required: 1, SkipForRollback: true}, rollback: true, want: "begins"},
		{name: "an automatic rollback the policy does not let skip", policy: &promotionv1alpha1.ApprovalPolicy{Required: 1}, rollback: true, want: "waits"},
		{name: "no policy recorded", want: "waits"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newVerifyFixture(t, promotionv1alpha1.Verification{})
			ctx := context.Background()
			rollout := &promotionv1alpha1.Rollout{Waves: []intstr.IntOrString{intstr.FromInt32(1)}, ApproveEachWave: true}
			f.stage.Spec.Rollout = rollout
			if tt.rollback {
				f.p.Spec.Rollback, f.p.Spec.RequestedBy = true, promotionv1alpha1.RequestedByAutoPromotion
			}
			f.p.Status.PlanDigest = "sha256:plan"
			f.p.Status.Stacks = []promotionv1alpha1.PromotedStack{
				{Name: "a", Wave: 1, State: promotionv1alpha1.StackSucceeded},
				{Name: "b", Wave: 2, State: promotionv1alpha1.StackPending},
			}
			f.p.Status.Rollout = &promotionv1alpha1.RolloutStatus{Spec: rollout.DeepCopy(), Waves: 2, Wave: 1, ApprovalPolicy: tt.policy}
			if tt.reject {
				a := &promotionv1alpha1.Approval{
					ObjectMeta: metav1.ObjectMeta{Namespace: f.p.Namespace, Name: "no"},
					Spec: promotionv1alpha1.ApprovalSpec{Promotion: f.p.Name, Stage: "qa", PlanDigest: "sha256:plan", Wave: 2,
						Decision: promotionv1alpha1.Reject, User: "carol", Comment: "wave 1 is slow"},
				}
				if err := f.r.Client.Create(ctx, a); err != nil {
					t.Fatal(err)
				}
			}
			// The wave begins to wait well after any decision above.
			s := &session{r: f.r, p: f.p, now: time.Now().Add(time.Hour), stage: f.stage}
			if _, err := s.advanceRollout(ctx); err != nil {
				t.Fatal(err)
			}
			var got string
			var w *sreconcile.Waiting
			switch b := f.p.Status.Stacks[1].State; {
			case s.outcome == promotionv1alpha1.PromotionAborted && b == promotionv1alpha1.StackSkipped:
				got = "aborted"
			case b == promotionv1alpha1.StackUpdating:
				got = "begins"
			case errors.As(s.wait, &w) && w.Reason == promotionv1alpha1.PromotionReasonAwaitingApproval:
				got = "waits"
			}
			if got != tt.want {
				t.Fatalf("wave 2 %s (b %s, outcome %q %q, wait %v), want %s", got, f.p.Status.Stacks[1].State, s.outcome, s.message, s.wait, tt.want)
			}
			if tt.reject && !strings.HasPrefix(s.message, "wave 2 rejected by carol: wave 1 is slow; ") {
				t.Errorf("message %q", s.message)
			}
		})
	}
}

// TestWaveChecksRemoved: a stage whose checks are removed while a wave's
// run of them is Running lets the wave pass and ends that run.
func TestWaveChecksRemoved(t *testing.T) {
	f := newVerifyFixture(t, promotionv1alpha1.Verification{})
	rollout := &promotionv1alpha1.Rollout{Waves: []intstr.IntOrString{intstr.FromInt32(1)}, VerifyEachWave: true}
	f.stage.Spec.Rollout = rollout
	f.p.Status.Stacks = []promotionv1alpha1.PromotedStack{
		{Name: "a", Wave: 1, State: promotionv1alpha1.StackSucceeded},
		{Name: "b", Wave: 2, State: promotionv1alpha1.StackPending},
	}
	f.p.Status.Rollout = &promotionv1alpha1.RolloutStatus{Spec: rollout.DeepCopy(), Waves: 2, Wave: 1,
		Verification: &promotionv1alpha1.WaveVerification{Wave: 1, Attempt: 1, VerificationStatus: promotionv1alpha1.VerificationStatus{Phase: verify.Running}}}
	s := &session{r: f.r, p: f.p, now: f.clock.now, stage: f.stage}
	if _, err := s.advanceRollout(context.Background()); err != nil {
		t.Fatal(err)
	}
	if wv := f.p.Status.Rollout.Verification; wv.Phase != verify.Succeeded || f.p.Status.Stacks[1].State != promotionv1alpha1.StackUpdating {
		t.Fatalf("verification %+v, b %s: want the run ended and wave 2 begun", wv, f.p.Status.Stacks[1].State)
	}
}
