package promotion

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/verify"
	"github.com/stackyard/stackyard/test/testenv"
)

// verifyClock is a clock the tests move by hand, at whole seconds as the
// API server's times are.
type verifyClock struct{ now time.Time }

func (c *verifyClock) Now() time.Time { return c.now }

// verifyFixture is a Running promotion into stage qa whose Stacks are
// deployed, in a namespace of its own on a real API server (verifyAPI)
// that holds what objects holds.
type verifyFixture struct {
	t     *testing.T
	r     *Reconciler
	clock *verifyClock
	p     *promotionv1alpha1.Promotion
	stage *promotionv1alpha1.Stage
}

// verifyAPI is a control plane of the verify fixtures' own: the suite's
// runs the whole operator, whose promotion controller would take the
// fixtures' Promotions through the steps these tests take by hand. The
// first fixture starts it; the suite's TestMain stops it (StopVerifyAPI).
var verifyAPI struct {
	once sync.Once
	env  *testenv.Env
	err  error
}

// StopVerifyAPI stops the verify fixtures' control plane, if one started.
func StopVerifyAPI() {
	if verifyAPI.env != nil {
		_ = verifyAPI.env.Stop()
	}
}

func newVerifyFixture(t *testing.T, v promotionv1alpha1.Verification, objects ...client.Object) *verifyFixture {
	t.Helper()
	verifyAPI.once.Do(func() {
		verifyAPI.env, verifyAPI.err = testenv.Start(testenv.Options{AddToScheme: []func(*k8sruntime.Scheme) error{promotionv1alpha1.AddToScheme}})
	})
	if verifyAPI.err != nil {
		t.Fatal(verifyAPI.err)
	}
	env := verifyAPI.env
	ns := env.NewNamespace(t, "verify-")
	ctx := context.Background()
	for _, obj := range objects {
		obj.SetNamespace(ns)
		createWithStatus(t, env.Client, obj)
	}
	st := &promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "qa"}}
	st.Spec.Pipeline, st.Spec.Verification = "web", &v
	st.Spec.Stacks = []promotionv1alpha1.StackBinding{{Name: "qa"}}
	st.Spec.Sources.Direct = true
	if err := env.Client.Create(ctx, st); err != nil {
		t.Fatalf("creating the Stage: %v", err)
	}
	p := &promotionv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "qa-r2"},
		Spec:       promotionv1alpha1.PromotionSpec{Stage: "qa", Release: "r2"},
	}
	p.Status.Phase = promotionv1alpha1.PromotionRunning
	createWithStatus(t, env.Client, p)
	clock := &verifyClock{now: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	return &verifyFixture{t: t, r: &Reconciler{Client: env.Client, APIReader: env.Client, Now: clock.Now}, clock: clock, p: p, stage: st}
}

// createWithStatus creates obj and then writes the status it was given,
// which a create leaves out, as the controllers that own it would.
func createWithStatus(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	want := obj.DeepCopyObject()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
	switch o := obj.(type) {
	case *promotionv1alpha1.Release:
		o.Status = want.(*promotionv1alpha1.Release).Status
	case *promotionv1alpha1.Promotion:
		o.Status = want.(*promotionv1alpha1.Promotion).Status
	default:
		return
	}
	if err := c.Status().Update(context.Background(), obj); err != nil {
		t.Fatalf("writing the status of %T %s: %v", obj, obj.GetName(), err)
	}
}

// step runs verify as one reconcile does, after observeStacks found the
// Stacks deployed, and returns the session and the wait it asked for.
func (f *verifyFixture) step() (*session, time.Duration) {
	f.t.Helper()
	s := &session{r: f.r, p: f.p, now: f.clock.now, stage: f.stage, outcome: promotionv1alpha1.PromotionSucceeded, message: "every Stack is Ready"}
	_, err := s.verify(context.Background())
	var waiting *sreconcile.Waiting
	switch {
	case errors.As(err, &waiting):
		return s, waiting.Interval()
	case err != nil:
		f.t.Fatalf("verify: %v", err)
	}
	return s, 0
}

// measured waits for the HTTP call a step started to end.
func (f *verifyFixture) measured() {
	f.t.Helper()
	select {
	case <-f.r.prober().wake:
	case <-time.After(30 * time.Second):
		f.t.Fatal("the HTTP measurement did not end")
	}
}

// TestVerifyHTTPCheck follows an HTTP check measured three times ten
// seconds apart, with one failure tolerated, through the reconciles that
// take it: each measurement is due at its time, recorded, and the second
// failure fails the check, the promotion and the release in the stage.
func TestVerifyHTTPCheck(t *testing.T) {
	answers := []string{`{"ok":true}`, `{"ok":false}`, `{"ok":false}`}
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, answers[calls.Add(1)-1])
	}))
	defer srv.Close()
	f := newVerifyFixture(t, promotionv1alpha1.Verification{Checks: []promotionv1alpha1.VerificationCheck{{
		Name: "health", Count: 3, FailureLimit: 1, Interval: &metav1.Duration{Duration: 10 * time.Second},
		InitialDelay: &metav1.Duration{Duration: 5 * time.Second}, SuccessCondition: "result.ok",
		HTTP: &promotionv1alpha1.HTTPCheck{URL: srv.URL},
	}}})
	start := f.clock.now

	// Before the initial delay, nothing is measured.
	s, wait := f.step()
	if wait != 5*time.Second || calls.Load() != 0 {
		t.Fatalf("first step: wait %v after %d calls, want 5s after none", wait, calls.Load())
	}
	if v := f.p.Status.Verification; v == nil || v.Phase != verify.Running || !v.StartTime.Time.Equal(start) {
		t.Fatalf("verification = %+v, want Running since %v", v, start)
	}
	for i, want := range []string{verify.Successful, verify.Failed, verify.Failed} {
		f.clock.now = start.Add(5*time.Second + time.Duration(i)*10*time.Second)
		if _, wait = f.step(); wait != verify.DefaultTimeout+5*time.Second {
			t.Fatalf("measurement %d: the step that starts the call waits %v", i+1, wait)
		}
		f.measured()
		f.clock.now = f.clock.now.Add(time.Second)
		s, wait = f.step()
		cs := f.p.Status.Verification.Checks[0]
		m := cs.Measurements[len(cs.Measurements)-1]
		if m.Phase != want || !m.Time.Time.Equal(start.Add(5*time.Second+time.Duration(i)*10*time.Second)) {
			t.Fatalf("measurement %d = %+v, want %s at the time it was due", i+1, m, want)
		}
		if i < 2 && wait != 9*time.Second {
			t.Fatalf("after measurement %d: wait %v, want 9s, until the next is due", i+1, wait)
		}
	}
	v := f.p.Status.Verification
	if v.Phase != verify.Failed || v.Checks[0].Successes != 1 || v.Checks[0].Failures != 2 {
		t.Fatalf("verification = %+v, want Failed with 1 success and 2 failures", v)
	}
	const want = `verification failed: check health failed: 2 of 3 measurements failed (failureLimit 1); last: Failed, value {"ok":false}: successCondition is false`
	if s.outcome != promotionv1alpha1.PromotionFailed || !s.releaseFailed || s.message != want {
		t.Fatalf("outcome %s (release failed %v) %q, want Failed, release failed, %q", s.outcome, s.releaseFailed, s.message, want)
	}
	if calls.Load() != 3 {
		t.Errorf("%d calls, want 3", calls.Load())
	}
	// Once settled, a reconcile run again (the outcome not yet stored)
	// measures nothing more and reaches the same outcome.
	if s, _ = f.step(); s.outcome != promotionv1alpha1.PromotionFailed || s.message != want || calls.Load() != 3 {
		t.Errorf("again: %s %q after %d calls", s.outcome, s.message, calls.Load())
	}
	if len(s.obs.checks) != 0 {
		t.Errorf("the check's end was counted twice: %+v", s.obs.checks)
	}
}

// TestVerifyStaleRead: a reconcile that reads the promotion from a cache
// a patch behind (without the verification's start, or without the
// measurement just recorded) begins at the same time and collects the
// same measurement: the endpoint is called once per measurement.
func TestVerifyStaleRead(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"calls":%d}`, calls.Add(1))
	}))
	defer srv.Close()
	f := newVerifyFixture(t, promotionv1alpha1.Verification{Checks: []promotionv1alpha1.VerificationCheck{{
		Name: "health", Count: 2, Interval: &metav1.Duration{Duration: 10 * time.Second}, HTTP: &promotionv1alpha1.HTTPCheck{URL: srv.URL},
	}}})
	start := f.clock.now
	behind := f.p.DeepCopy()
	f.step() // begins, and starts measurement 1
	f.measured()

	// A patch behind: verification not begun, a second later.
	f.p = behind.DeepCopy()
	f.clock.now = start.Add(time.Second)
	f.step()
	v := f.p.Status.Verification
	if !v.StartTime.Time.Equal(start) {
		t.Errorf("verification begun again at %v, want %v", v.StartTime.Time, start)
	}
	if ms := v.Checks[0].Measurements; len(ms) != 1 || ms[0].Value != `{"calls":1}` || !ms[0].Time.Time.Equal(start) {
		t.Errorf("measurements %+v, want the first call's, at %v", ms, start)
	}
	// Again a patch behind, without the measurement just recorded.
	recorded := f.p.DeepCopy()
	f.p = behind.DeepCopy()
	f.step()
	if ms := f.p.Status.Verification.Checks[0].Measurements; len(ms) != 1 || ms[0].Value != `{"calls":1}` {
		t.Errorf("measurements %+v, want the first call's again", ms)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d calls for one measurement", n)
	}
	// Measurement 2 is a call of its own.
	f.p = recorded
	f.clock.now = start.Add(10 * time.Second)
	f.step()
	f.measured()
	f.step()
	if v := f.p.Status.Verification; v.Phase != verify.Succeeded || calls.Load() != 2 {
		t.Errorf("verification %+v after %d calls, want Succeeded after 2", v, calls.Load())
	}
}

// TestVerifyJobCheck creates a Job owned by the promotion and judges it by
// its conditions, written by hand here as no Job controller runs; a Job
// that failed fails the check, and with rollbackOnFailure a rollback of
// the release verified last in the stage is asked for, once.
func TestVerifyJobCheck(t *testing.T) {
	at := func(d time.Duration) metav1.Time {
		return metav1.NewTime(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Add(d))
	}
	releases := []client.Object{
		releaseIn("r0", map[string]metav1.Time{"qa": at(0)}, nil),
		releaseIn("r1", map[string]metav1.Time{"qa": at(time.Hour)}, nil),
		// Verified after r1, but failed there since: not a target.
		releaseIn("r1b", map[string]metav1.Time{"qa": at(2 * time.Hour)}, map[string]metav1.Time{"qa": at(3 * time.Hour)}),
		// Verified last, in another stage only.
		releaseIn("r1c", map[string]metav1.Time{"prod": at(4 * time.Hour)}, nil),
		releaseIn("r2", nil, nil),
	}
	f := newVerifyFixture(t, promotionv1alpha1.Verification{
		RollbackOnFailure: true,
		Checks: []promotionv1alpha1.VerificationCheck{{Name: "Smoke Test", Job: &promotionv1alpha1.JobCheck{Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "smoke", Image: "busybox"}}}},
		}}}},
	}, releases...)
	ctx := context.Background()

	s, wait := f.step()
	if wait != jobWait || !strings.Contains(f.p.Status.Verification.Checks[0].Name, "Smoke Test") {
		t.Fatalf("first step: wait %v, status %+v", wait, f.p.Status.Verification)
	}
	name := jobName(f.p.Name, checkRun{}, "Smoke Test", 1)
	job := &batchv1.Job{}
	if err := f.r.Client.Get(ctx, client.ObjectKey{Namespace: f.p.Namespace, Name: name}, job); err != nil {
		t.Fatalf("the Job: %v", err)
	}
	if !metav1.IsControlledBy(job, f.p) || job.Annotations[CheckAnnotation] != "Smoke Test" || job.Labels[promotionv1alpha1.StageLabel] != "qa" {
		t.Fatalf("Job %s: owners %+v annotations %v labels %v", name, job.OwnerReferences, job.Annotations, job.Labels)
	}
	if s.outcome != promotionv1alpha1.PromotionSucceeded {
		t.Fatalf("outcome %s while the Job runs", s.outcome)
	}
	// Still running: nothing changes.
	f.clock.now = f.clock.now.Add(time.Minute)
	if _, wait = f.step(); wait != jobWait || f.p.Status.Verification.Checks[0].Successes+f.p.Status.Verification.Checks[0].Failures != 0 {
		t.Fatalf("while the Job runs: wait %v, status %+v", wait, f.p.Status.Verification.Checks[0])
	}

	failJob(t, f, job)
	s, _ = f.step()
	rollback := RollbackName("qa", f.p.Name)
	want := "verification failed: check Smoke Test failed: 1 of 1 measurements failed (failureLimit 0); last: Failed, value Failed: Job " + name +
		" failed: BackoffLimitExceeded: Job has reached the specified backoff limit; rolling back to release r1 (promotion " + rollback + ")"
	if s.outcome != promotionv1alpha1.PromotionFailed || s.message != want {
		t.Fatalf("outcome %s %q, want Failed %q", s.outcome, s.message, want)
	}
	p := &promotionv1alpha1.Promotion{}
	if err := f.r.Client.Get(ctx, client.ObjectKey{Namespace: f.p.Namespace, Name: rollback}, p); err != nil {
		t.Fatalf("the rollback: %v", err)
	}
	if p.Spec.Release != "r1" || !p.Spec.Rollback || p.Spec.RequestedBy != promotionv1alpha1.RequestedByAutoPromotion ||
		!strings.HasPrefix(p.Spec.Reason, "verification of qa-r2 failed: check Smoke Test failed") || p.Labels[promotionv1alpha1.StageLabel] != "qa" {
		t.Fatalf("rollback %+v %v", p.Spec, p.Labels)
	}
	// A reconcile run again finds the rollback it asked for.
	if s, _ = f.step(); s.message != want {
		t.Fatalf("again: %q", s.message)
	}
}

// TestVerifyStopsWithTheStacks: a Stack failing while checks run ends
// them, deleting their Jobs.
func TestVerifyStopsWithTheStacks(t *testing.T) {
	f := newVerifyFixture(t, promotionv1alpha1.Verification{Checks: []promotionv1alpha1.VerificationCheck{{
		Name: "smoke", Job: &promotionv1alpha1.JobCheck{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "smoke", Image: "busybox"}},
		}}}},
	}}})
	f.step()
	s := &session{r: f.r, p: f.p, now: f.clock.now, stage: f.stage, outcome: promotionv1alpha1.PromotionFailed, message: "Stack qa: stalled"}
	if _, err := s.verify(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := f.p.Status.Verification; v.Phase != verify.Failed || v.Message != "stopped: Stack qa: stalled" {
		t.Errorf("verification = %+v", v)
	}
	var jobs batchv1.JobList
	if err := f.r.Client.List(context.Background(), &jobs, client.InNamespace(f.p.Namespace)); err != nil || len(jobs.Items) != 0 {
		t.Errorf("jobs left: %d (%v)", len(jobs.Items), err)
	}
}

// TestVerifyRefusesBadConditions: a condition that does not compile fails
// the check at its first measurement, whatever failureLimit says.
func TestVerifyRefusesBadConditions(t *testing.T) {
	f := newVerifyFixture(t, promotionv1alpha1.Verification{Checks: []promotionv1alpha1.VerificationCheck{{
		Name: "health", FailureLimit: 5, Count: 10, SuccessCondition: "len(result) > 0",
		HTTP: &promotionv1alpha1.HTTPCheck{URL: "http://127.0.0.1:1/"},
	}}})
	s, _ := f.step()
	if s.outcome != promotionv1alpha1.PromotionFailed || !strings.Contains(s.message, "undeclared reference to 'len'") {
		t.Errorf("outcome %s %q", s.outcome, s.message)
	}
}

// releaseIn is a Release of pipeline web verified and failed in stages
// at the times given.
func releaseIn(name string, verified, failed map[string]metav1.Time) *promotionv1alpha1.Release {
	r := &promotionv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{promotionv1alpha1.PipelineLabel: "web"}}}
	r.Spec.Pipeline = "web"
	r.Spec.Commit.SHA = fmt.Sprintf("%040x", len(name))
	for stage, t := range verified {
		if r.Status.VerifiedIn == nil {
			r.Status.VerifiedIn = map[string]promotionv1alpha1.ReleaseInStage{}
		}
		r.Status.VerifiedIn[stage] = promotionv1alpha1.ReleaseInStage{Since: t}
	}
	for stage, t := range failed {
		if r.Status.FailedIn == nil {
			r.Status.FailedIn = map[string]promotionv1alpha1.ReleaseInStage{}
		}
		r.Status.FailedIn[stage] = promotionv1alpha1.ReleaseInStage{Since: t}
	}
	return r
}

func TestJobName(t *testing.T) {
	long := strings.Repeat("promotion", 20)
	seen := map[string]bool{}
	for _, tt := range []struct {
		promotion string
		run       checkRun
		check     string
		n         int32
	}{
		{"qa-r2", checkRun{}, "smoke", 1},
		{"qa-r2", checkRun{}, "smoke", 2},
		{"qa-r2", checkRun{}, "Smoke Test", 1},
		{"qa-r2", checkRun{}, "smoke-test", 1},
		{long, checkRun{}, "smoke", 1},
		{long, checkRun{}, "smoke", 100},
		{"qa-r2", checkRun{}, "---", 1},
		{"qa-r2", checkRun{wave: 1, attempt: 1}, "smoke", 1},
		{"qa-r2", checkRun{wave: 2, attempt: 1}, "smoke", 1},
		{"qa-r2", checkRun{wave: 1, attempt: 2}, "smoke", 1},
		{long, checkRun{wave: 7, attempt: 1000}, "smoke", 100},
	} {
		name := jobName(tt.promotion, tt.run, tt.check, tt.n)
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			t.Errorf("jobName(%q, %+v, %q, %d) = %q: %v", tt.promotion, tt.run, tt.check, tt.n, name, errs)
		}
		if seen[name] {
			t.Errorf("jobName(%q, %+v, %q, %d) = %q, given twice", tt.promotion, tt.run, tt.check, tt.n, name)
		}
		seen[name] = true
		if again := jobName(tt.promotion, tt.run, tt.check, tt.n); again != name {
			t.Errorf("jobName is not stable: %q, then %q", name, again)
		}
	}
	// The promotion's own verification keeps the names it had before
	// waves were checked: a Job of a verification that runs while the
	// operator is upgraded is found again.
	if got := jobName("qa-r2", checkRun{}, "smoke", 1); got != "qa-r2-smoke-1-fee50d7b" {
		t.Errorf("jobName of the promotion's verification = %q", got)
	}
}

func TestRecordKeepsTheLastMeasurements(t *testing.T) {
	cs := &promotionv1alpha1.CheckStatus{}
	for i := range 12 {
		phase := verify.Successful
		if i%3 == 0 {
			phase = verify.Error
		}
		record(cs, promotionv1alpha1.Measurement{Phase: phase, Value: fmt.Sprint(i)})
	}
	if cs.Successes != 8 || cs.Failures != 4 || len(cs.Measurements) != maxMeasurements || cs.Measurements[0].Value != "2" {
		t.Errorf("after 12: %d successes, %d failures, %d kept from %s", cs.Successes, cs.Failures, len(cs.Measurements), cs.Measurements[0].Value)
	}
}

func TestCeilSecond(t *testing.T) {
	base := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	for in, want := range map[time.Time]time.Time{
		base:                                      base,
		base.Add(time.Nanosecond):                 base.Add(time.Second),
		base.Add(999 * time.Millisecond):          base.Add(time.Second),
		base.Add(1500 * time.Millisecond):         base.Add(2 * time.Second),
		base.Add(-500 * time.Millisecond):         base,
		base.Add(2*time.Second + time.Nanosecond): base.Add(3 * time.Second),
	} {
		if got := ceilSecond(in); !got.Equal(want) {
			t.Errorf("ceilSecond(%v) = %v, want %v", in, got, want)
		}
	}
}
