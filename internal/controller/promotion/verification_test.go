package promotion_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/controller/promotion"
)

// TestVerificationFailureRollsBack: qa checks, over HTTP with a bearer
// token read from a Secret, that what it runs is healthy, and the test's
// endpoint calls v2 unhealthy. r1 passes and flows on to prod; r2 fails
// its check, so its promotion fails, r2 is failed in qa and never reaches
// prod, and qa is rolled back to r1 by a rollback Promotion that passes
// the same check. The token appears nowhere: not in status, events or the
// operator's log.
func TestVerificationFailureRollsBack(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	repo := newProgramRepo(t)
	c0, c1, c2 := repo.commit("v0"), repo.commit("v1"), repo.commit("v2")
	const token = "Bearer token-of-the-verification-test-9c41e"

	qaStack, qaFile := gitStack(t, ns, "qa", repo.URL, c0)
	prodStack, prodFile := gitStack(t, ns, "prod", repo.URL, c0)
	create(t, qaStack)
	create(t, prodStack)
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "health"}, StringData: map[string]string{"authorization": token}})
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("Authorization") != token {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		// The version qa runs is what the endpoint reports on; v2 is
		// broken. The token is echoed, as a careless endpoint might.
		version, _ := os.ReadFile(qaFile)
		_ = json.NewEncoder(w).Encode(map[string]any{"version": string(version), "healthy": string(version) != "v2", "seen": r.Header.Get("Authorization")})
	}))
	t.Cleanup(srv.Close)

	create(t, pipeline(ns, repo.URL))
	base := time.Now().Add(-time.Hour)
	create(t, release(ns, "r1", c1, base))
	create(t, stage(ns, "qa", []string{"qa"}, func(spec *promotionv1alpha1.StageSpec) {
		autoPromote(spec)
		spec.Verification = &promotionv1alpha1.Verification{
			Checks: []promotionv1alpha1.VerificationCheck{{
				Name:             "health",
				SuccessCondition: "result.healthy",
				HTTP: &promotionv1alpha1.HTTPCheck{URL: srv.URL + "/health", Headers: []promotionv1alpha1.HTTPHeader{{
					Key: "Authorization", ValueFrom: &promotionv1alpha1.HeaderValueSource{SecretKeyRef: corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "health"}, Key: "authorization",
					}},
				}}},
			}},
			RollbackOnFailure: true,
		}
	}))
	create(t, stage(ns, "prod", []string{"prod"}, func(spec *promotionv1alpha1.StageSpec) {
		autoPromote(spec)
		spec.Sources = promotionv1alpha1.ReleaseSources{Stages: []string{"qa"}}
	}))

	// r1 passes its check in qa, and flows on to prod.
	qa1 := waitPromotionOf(t, ns, "qa", "r1")
	g.Expect(qa1.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), qa1.Status.Message)
	g.Expect(qa1.Status.Message).To(ContainSubstring("verification check health passed"))
	g.Expect(qa1.Status.Verification).To(HaveValue(HaveField("Phase", "Succeeded")))
	g.Expect(qa1.Status.Verification.Checks).To(ConsistOf(SatisfyAll(
		HaveField("Name", "health"), HaveField("Phase", "Succeeded"), HaveField("Successes", int32(1)), HaveField("Failures", int32(0)),
		HaveField("Measurements", ConsistOf(SatisfyAll(
			HaveField("Phase", "Successful"), HaveField("Value", `{"healthy":true,"seen":"[secret]","version":"v1"}`),
		))),
	)))
	prod1 := waitPromotionOf(t, ns, "prod", "r1")
	g.Expect(prod1.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), prod1.Status.Message)

	// r2 fails its check: the promotion fails, r2 fails in qa.
	create(t, release(ns, "r2", c2, base.Add(time.Minute)))
	qa2 := waitPromotionOf(t, ns, "qa", "r2")
	g.Expect(qa2.Status.Phase).To(Equal(promotionv1alpha1.PromotionFailed), qa2.Status.Message)
	g.Expect(qa2.Status.Message).To(HavePrefix("verification failed: check health failed: 1 of 1 measurements failed (failureLimit 0); " +
		`last: Failed, value {"healthy":false,"seen":"[secret]","version":"v2"}: successCondition is false`))
	g.Expect(qa2.Status.Verification).To(HaveValue(SatisfyAll(HaveField("Phase", "Failed"), HaveField("Message", HavePrefix("check health failed")))))
	g.Expect(qa2.Status.Verification.Checks[0].Measurements).To(ConsistOf(HaveField("Phase", "Failed")))
	g.Expect(readFile(g, qaFile)).To(Equal("v2"), "the failed promotion deployed r2 before its check")
	r2 := &promotionv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r2"}}
	get(g, r2)
	g.Expect(r2.Status.FailedIn).To(HaveKeyWithValue("qa", HaveField("Promotion", qa2.Name)))
	g.Expect(r2.Status.VerifiedIn).NotTo(HaveKey("qa"))
	g.Expect(eventReasons(g, ns, "Promotion", qa2.Name)).To(ContainElements(promotionv1alpha1.EventVerificationFailed, promotionv1alpha1.EventPromotionFailed))

	// qa is rolled back to r1, by a Promotion that goes the normal way and
	// passes the same check.
	rollbackName := promotion.RollbackName("qa", qa2.Name)
	g.Expect(qa2.Status.Message).To(ContainSubstring("rolling back to release r1 (promotion " + rollbackName + ")"))
	rollback := waitFinished(t, ns, rollbackName, opTimeout)
	g.Expect(rollback.Spec).To(SatisfyAll(
		HaveField("Stage", "qa"), HaveField("Release", "r1"), HaveField("Rollback", true),
		HaveField("RequestedBy", promotionv1alpha1.RequestedByAutoPromotion), HaveField("Reason", HavePrefix("verification of "+qa2.Name+" failed: check health failed")),
	))
	g.Expect(rollback.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), rollback.Status.Message)
	g.Expect(rollback.Status.Verification).To(HaveValue(HaveField("Phase", "Succeeded")))
	g.Expect(readFile(g, qaFile)).To(Equal("v1"))
	g.Expect(eventReasons(g, ns, "Stage", "qa")).To(ContainElements(promotionv1alpha1.EventVerificationFailed, promotionv1alpha1.EventRollbackRequested, promotionv1alpha1.EventVerificationSucceeded))
	waitFor(t, &promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "qa"}}, opTimeout, func(g Gomega, st *promotionv1alpha1.Stage) {
		g.Expect(st.Status.CurrentRelease).To(SatisfyAll(HaveField("Name", "r1"), HaveField("Rollback", true)))
	})

	// prod never gets r2: it is not verified in qa, prod's only source.
	// A negative check no event can end: prod says what it waits for, not
	// each time it declines a release. The stage controller watches
	// Releases, so prod is reconciled as soon as r2's status changes; three
	// seconds without a promotion of r2 cover that reconcile and the ones
	// its own changes cause.
	g.Consistently(func(g Gomega) {
		for _, p := range promotionsOf(g, ns, "prod") {
			g.Expect(p.Spec.Release).To(Equal("r1"))
		}
	}, 3*time.Second, 250*time.Millisecond).Should(Succeed())
	g.Expect(readFile(g, prodFile)).To(Equal("v1"))
	prod := &promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"}}
	get(g, prod)
	g.Expect(prod.Status.CurrentRelease).To(HaveField("Name", "r1"))

	// The token went out with every measurement, and was never written.
	g.Expect(calls.Load()).To(BeNumerically(">=", 3))
	var promotions promotionv1alpha1.PromotionList
	g.Expect(env.Client.List(ctx, &promotions, client.InNamespace(ns))).To(Succeed())
	data, err := json.Marshal(promotions)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).NotTo(ContainSubstring("token-of-the-verification-test"))
	var events eventsv1.EventList
	g.Expect(env.Client.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
	for _, e := range events.Items {
		g.Expect(e.Note).NotTo(ContainSubstring("token-of-the-verification-test"), e.Reason)
	}
	g.Expect(logs.String()).NotTo(ContainSubstring("token-of-the-verification-test"))

	// The metrics count the promotions and the checks of qa.
	g.Expect(metricValue(g, "stackyard_promotions_total", map[string]string{"namespace": ns, "stage": "qa", "result": "failed"})).To(Equal(1.0))
	g.Expect(metricValue(g, "stackyard_promotions_total", map[string]string{"namespace": ns, "stage": "qa", "result": "succeeded"})).To(Equal(2.0))
	g.Expect(metricValue(g, "stackyard_verification_checks_total", map[string]string{"namespace": ns, "stage": "qa", "check": "health", "result": "failed"})).To(Equal(1.0))
	g.Expect(metricValue(g, "stackyard_verification_checks_total", map[string]string{"namespace": ns, "stage": "qa", "check": "health", "result": "passed"})).To(Equal(2.0))
}

// TestVerificationPasses: a stage's two checks, an HTTP check measured
// three times a second apart and a Job that must complete, both pass; the
// promotion runs while they do, saying which, and succeeds after.
func TestVerificationPasses(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	repo := newProgramRepo(t)
	c0, c1 := repo.commit("v0"), repo.commit("v1")
	s, _ := gitStack(t, ns, "staging", repo.URL, c0)
	create(t, s)
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"ok":true,"calls":%d}`, calls.Add(1))
	}))
	t.Cleanup(srv.Close)
	create(t, pipeline(ns, repo.URL))
	create(t, release(ns, "r1", c1, time.Now()))
	create(t, stage(ns, "staging", []string{"staging"}, func(spec *promotionv1alpha1.StageSpec) {
		spec.Verification = &promotionv1alpha1.Verification{Checks: []promotionv1alpha1.VerificationCheck{
			{
				Name: "ready", Count: 3, Interval: &metav1.Duration{Duration: time.Second},
				SuccessCondition: "result.ok && result.calls >= 1",
				HTTP:             &promotionv1alpha1.HTTPCheck{URL: srv.URL + "/ready"},
			},
			{
				Name: "smoke",
				Job: &promotionv1alpha1.JobCheck{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "smoke", Image: "busybox", Command: []string{"true"}}},
				}}}},
			},
		}}
	}))
	create(t, askFor(ns, "staging-r1", "staging", "r1", false))

	// The Job is created, owned by the Promotion, which runs meanwhile
	// and says which check it waits for.
	var job batchv1.Job
	NewWithT(t).Eventually(func(g Gomega) {
		var jobs batchv1.JobList
		g.Expect(env.Client.List(ctx, &jobs, client.InNamespace(ns))).To(Succeed())
		g.Expect(jobs.Items).To(HaveLen(1))
		job = jobs.Items[0]
	}, opTimeout, 250*time.Millisecond).Should(Succeed(), func() string { return describeNamespace(ns) })
	g.Expect(job.OwnerReferences).To(ConsistOf(SatisfyAll(HaveField("Kind", "Promotion"), HaveField("Name", "staging-r1"), HaveField("Controller", HaveValue(BeTrue())))))
	g.Expect(job.Annotations).To(HaveKeyWithValue(promotion.CheckAnnotation, "smoke"))
	g.Expect(job.Spec.Template.Spec.Containers).To(ConsistOf(HaveField("Image", "busybox")))
	// The Job is created during the reconcile whose status patch, at its
	// end, says so: the Promotion may be read in between.
	running := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "staging-r1"}}
	NewWithT(t).Eventually(func(g Gomega) {
		get(g, running)
		g.Expect(running.Status.Phase).To(Equal(promotionv1alpha1.PromotionRunning))
		g.Expect(running.Status.Message).To(SatisfyAll(HavePrefix("verifying: "), ContainSubstring("check smoke: measurement 1 of 1: Job "+job.Name+" running")))
	}, opTimeout, 100*time.Millisecond).Should(Succeed())

	// No kubelet runs in this test environment, so the Job's pod never
	// runs: the test writes the status the Job controller would.
	now := metav1.Now()
	job.Status = batchv1.JobStatus{
		StartTime: &now, CompletionTime: &now, Succeeded: 1,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
	}
	g.Expect(env.Client.Status().Update(ctx, &job)).To(Succeed())

	p := waitFinished(t, ns, "staging-r1", opTimeout)
	g.Expect(p.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), p.Status.Message)
	g.Expect(p.Status.Message).To(HaveSuffix("; 2 verification checks passed"))
	v := p.Status.Verification
	g.Expect(v).To(HaveValue(HaveField("Phase", "Succeeded")))
	g.Expect(v.Checks).To(ConsistOf(
		SatisfyAll(HaveField("Name", "ready"), HaveField("Phase", "Succeeded"), HaveField("Successes", int32(3)), HaveField("Failures", int32(0))),
		SatisfyAll(HaveField("Name", "smoke"), HaveField("Phase", "Succeeded"), HaveField("Successes", int32(1)),
			HaveField("Measurements", ConsistOf(HaveField("Value", "Complete")))),
	))
	for _, c := range v.Checks {
		if c.Name != "ready" {
			continue
		}
		g.Expect(c.Measurements).To(HaveLen(3))
		g.Expect(c.Measurements[0].Time.Time).NotTo(BeTemporally("<", v.StartTime.Time), "measured before verification began")
		for i := 1; i < len(c.Measurements); i++ {
			gap := c.Measurements[i].Time.Sub(c.Measurements[i-1].Time.Time)
			g.Expect(gap).To(BeNumerically(">=", time.Second), "measurements %d and %d are %s apart, less than the interval", i-1, i, gap)
		}
		for i, m := range c.Measurements {
			g.Expect(m.Phase).To(Equal("Successful"))
			g.Expect(m.Value).To(Equal(fmt.Sprintf(`{"calls":%d,"ok":true}`, i+1)))
		}
	}
	g.Expect(calls.Load()).To(Equal(int32(3)), "one call per measurement")
	g.Expect(eventReasons(g, ns, "Promotion", "staging-r1")).To(ContainElement(promotionv1alpha1.EventVerificationSucceeded))
	g.Expect(metricValue(g, "stackyard_verification_checks_total", map[string]string{"namespace": ns, "stage": "staging", "check": "ready", "result": "passed"})).To(Equal(1.0))
	g.Expect(metricValue(g, "stackyard_verification_checks_total", map[string]string{"namespace": ns, "stage": "staging", "check": "smoke", "result": "passed"})).To(Equal(1.0))
	g.Expect(metricValue(g, "stackyard_promotions_total", map[string]string{"namespace": ns, "stage": "staging", "result": "succeeded"})).To(Equal(1.0))
}

// metricValue reads the series of name with exactly labels from the
// registry the operator (running in this process) exports its metrics
// through: a counter's value, a histogram's count of observations; zero
// when there is no such series.
func metricValue(g Gomega, name string, labels map[string]string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// hasLabels reports whether m's labels are exactly labels.
func hasLabels(m *dto.Metric, labels map[string]string) bool {
	if len(m.GetLabel()) != len(labels) {
		return false
	}
	for _, l := range m.GetLabel() {
		if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
			return false
		}
	}
	return true
}
