package promotion

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/redact"
	"github.com/stackyard/stackyard/internal/verify"
)

// CheckAnnotation names, on a verification Job, the check it measures.
const CheckAnnotation = "promotion.stackyard.dev/check"

// jobWait is how long a promotion waits for a verification Job before it
// looks by itself; the Job's changes wake it sooner.
const jobWait = time.Minute

// measured is one measurement of a check, or why none was taken yet.
type measured struct {
	// m is the measurement; nil while it is being taken.
	m *promotionv1alpha1.Measurement
	// wait is when to look again while m is nil (the change of a Job or
	// the end of an HTTP call wakes the promotion sooner), and what about.
	wait  time.Duration
	doing string
	// final fails the check at once, whatever its failureLimit: the check
	// itself is wrong (a condition that does not compile, a Job spec the
	// API server refuses) and measuring again would not help.
	final bool
}

// measureHTTP takes, or collects, measurement n of an HTTP check. The
// call runs off the reconcile worker (see probes); its end wakes the
// promotion.
func (s *session) measureHTTP(ctx context.Context, run checkRun, c *promotionv1alpha1.VerificationCheck, n int32) (measured, error) {
	conds, err := verify.Compile(c.SuccessCondition, c.FailureCondition)
	if err != nil {
		return s.measuredNow(verify.Error, "", err.Error(), true), nil
	}
	probes := s.r.prober()
	key := probeKey{run: runKey{promotion: s.p.UID, checkRun: run}, check: c.Name, n: n}
	if res, started, done := probes.poll(key); done {
		t := metav1.NewTime(started.Truncate(time.Second))
		return measured{m: &promotionv1alpha1.Measurement{Time: t, Phase: res.Phase, Value: res.Value, Message: res.Message}}, nil
	} else if !started.IsZero() {
		return measured{wait: timeoutOf(c.HTTP) + 5*time.Second, doing: "calling " + c.HTTP.URL}, nil
	}
	headers, secrets, err := s.headers(ctx, c.HTTP.Headers)
	var missing *missingError
	switch {
	case errors.As(err, &missing):
		return s.measuredNow(verify.Error, "", err.Error(), false), nil
	case err != nil:
		return measured{}, err
	}
	probes.start(key, client.ObjectKeyFromObject(s.p), s.now, verify.HTTPRequest{
		URL: c.HTTP.URL, Method: c.HTTP.Method, Headers: headers, Body: c.HTTP.Body, JSONPath: c.HTTP.JSONPath,
		Timeout: timeoutOf(c.HTTP), Secrets: secrets, AllowLinkLocal: c.HTTP.AllowLinkLocal,
	}, conds)
	return measured{wait: timeoutOf(c.HTTP) + 5*time.Second, doing: "calling " + c.HTTP.URL}, nil
}

// measuredNow is a measurement taken now.
func (s *session) measuredNow(phase, value, msg string, final bool) measured {
	return measured{m: &promotionv1alpha1.Measurement{
		Time: metav1.NewTime(s.now.Truncate(time.Second)), Phase: phase, Value: value, Message: sreconcile.Truncate(msg, maxMessage),
	}, final: final}
}

// timeoutOf is the bound of one call of check.
func timeoutOf(check *promotionv1alpha1.HTTPCheck) time.Duration {
	if check.TimeoutSeconds > 0 {
		return time.Duration(check.TimeoutSeconds) * time.Second
	}
	return verify.DefaultTimeout
}

// missingError is a header's Secret or key that does not exist: the
// measurement is an Error (a person must create it), not a retried
// failure of the API.
type missingError struct{ msg string }

func (e *missingError) Error() string { return e.msg }

// headers resolves a check's headers, reading valueFrom from Secrets of
// the promotion's namespace, and returns the Set of the values read from
// Secrets, which nothing the check reports may contain.
func (s *session) headers(ctx context.Context, hs []promotionv1alpha1.HTTPHeader) ([]verify.Header, *redact.Set, error) {
	secrets := redact.New()
	out := make([]verify.Header, 0, len(hs))
	for _, h := range hs {
		if h.ValueFrom == nil {
			out = append(out, verify.Header{Key: h.Key, Value: h.Value})
			continue
		}
		ref := h.ValueFrom.SecretKeyRef
		optional := ref.Optional != nil && *ref.Optional
		secret, err := get(ctx, s.r.Client, s.p.Namespace, "Secret", ref.Name, &corev1.Secret{})
		if err != nil {
			return nil, nil, err
		}
		value, ok := []byte(nil), false
		if secret != nil {
			value, ok = secret.Data[ref.Key]
		}
		switch {
		case ok:
			secrets.Add(string(value))
			out = append(out, verify.Header{Key: h.Key, Value: string(value)})
		case optional:
		case secret == nil:
			return nil, nil, &missingError{fmt.Sprintf("header %s: Secret %q not found", h.Key, ref.Name)}
		default:
			return nil, nil, &missingError{fmt.Sprintf("header %s: Secret %q has no key %q", h.Key, ref.Name, ref.Key)}
		}
	}
	return out, secrets, nil
}

// measureJob takes, or collects, measurement n of a Job check: it creates
// the Job, owned by the Promotion, and waits (woken by the Job's changes)
// for its Complete or Failed condition. The Job's own retries
// (backoffLimit) happen inside one measurement.
func (s *session) measureJob(ctx context.Context, run checkRun, c *promotionv1alpha1.VerificationCheck, n int32) (measured, error) {
	name := jobName(s.p.Name, run, c.Name, n)
	job, err := get(ctx, s.r.Client, s.p.Namespace, "Job", name, &batchv1.Job{})
	if err != nil {
		return measured{}, err
	}
	running := measured{wait: jobWait, doing: "Job " + name + " running"}
	if job == nil {
		job = &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: s.p.Namespace,
			Labels:      map[string]string{promotionv1alpha1.StageLabel: s.p.Spec.Stage},
			Annotations: map[string]string{CheckAnnotation: c.Name},
		}, Spec: *c.Job.Spec.DeepCopy()}
		if run.wave > 0 {
			job.Labels[WaveLabel] = strconv.Itoa(int(run.wave))
			setWaveEnv(&job.Spec.Template.Spec, s.p.Name, run.wave)
		}
		if err := controllerutil.SetControllerReference(s.p, job, s.r.Client.Scheme()); err != nil {
			return measured{}, err
		}
		err := s.r.Client.Create(ctx, job)
		switch {
		case apierrors.IsAlreadyExists(err):
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			return s.measuredNow(verify.Error, "", fmt.Sprintf("creating Job %s: %v", name, err), true), nil
		case err != nil:
			return measured{}, sreconcile.NewGeneric("", fmt.Errorf("creating Job %s: %w", name, err))
		}
		return running, nil
	}
	if !metav1.IsControlledBy(job, s.p) {
		return s.measuredNow(verify.Error, "", fmt.Sprintf("Job %s exists and was not created by this promotion", name), true), nil
	}
	for _, cond := range job.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		t := metav1.NewTime(job.CreationTimestamp.Truncate(time.Second))
		switch cond.Type {
		case batchv1.JobComplete:
			return measured{m: &promotionv1alpha1.Measurement{Time: t, Phase: verify.Successful, Value: "Complete"}}, nil
		case batchv1.JobFailed:
			return measured{m: &promotionv1alpha1.Measurement{Time: t, Phase: verify.Failed, Value: "Failed",
				Message: sreconcile.Truncate(fmt.Sprintf("Job %s failed: %s: %s", name, cond.Reason, cond.Message), maxMessage)}}, nil
		}
	}
	return running, nil
}

// WaveLabel names, on the Job of a wave's check (rollout.verifyEachWave),
// the wave it checks.
const WaveLabel = "promotion.stackyard.dev/wave"

// setWaveEnv tells each container of a wave's check which promotion and
// wave it checks (STACKYARD_PROMOTION, STACKYARD_WAVE), where the check's
// own spec does not set those names.
func setWaveEnv(pod *corev1.PodSpec, promotion string, wave int32) {
	add := func(c *corev1.Container) {
		for _, e := range []corev1.EnvVar{{Name: "STACKYARD_PROMOTION", Value: promotion}, {Name: "STACKYARD_WAVE", Value: strconv.Itoa(int(wave))}} {
			if !slices.ContainsFunc(c.Env, func(have corev1.EnvVar) bool { return have.Name == e.Name }) {
				c.Env = append(c.Env, e)
			}
		}
	}
	for i := range pod.InitContainers {
		add(&pod.InitContainers[i])
	}
	for i := range pod.Containers {
		add(&pod.Containers[i])
	}
}

// jobName is the name of the Job of measurement n of check in run of
// promotion: readable, unique by a digest of all four, and at most 63
// characters (a Job's name becomes a label value on its pods). A wave's
// run says its wave ("-w2"); the promotion's verification keeps the names
// it had before waves were checked.
func jobName(promotion string, run checkRun, check string, n int32) string {
	in := fmt.Appendf(nil, "%s\x00%s\x00%d", promotion, check, n)
	suffix := fmt.Sprintf("-%d", n)
	if run.wave > 0 {
		in = fmt.Appendf(in, "\x00wave %d attempt %d", run.wave, run.attempt)
		suffix = fmt.Sprintf("-w%d-%d", run.wave, n)
	}
	h := sha256.Sum256(in)
	suffix += "-" + hex.EncodeToString(h[:])[:8]
	base := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		default:
			return '-'
		}
	}, promotion+"-"+check)
	base = strings.TrimRight(base[:min(len(base), 63-len(suffix))], "-")
	return base + suffix
}

// deleteJobs deletes the promotion's verification Jobs that still run,
// once verification has ended without them.
func (s *session) deleteJobs(ctx context.Context) error {
	var jobs batchv1.JobList
	if err := s.r.Client.List(ctx, &jobs, client.InNamespace(s.p.Namespace),
		client.MatchingLabels{promotionv1alpha1.StageLabel: s.p.Spec.Stage}); err != nil {
		return sreconcile.NewGeneric("", fmt.Errorf("listing verification Jobs: %w", err))
	}
	for i := range jobs.Items {
		job := &jobs.Items[i]
		if !metav1.IsControlledBy(job, s.p) || jobFinished(job) {
			continue
		}
		err := s.r.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if client.IgnoreNotFound(err) != nil {
			return sreconcile.NewGeneric("", fmt.Errorf("deleting verification Job %s: %w", job.Name, err))
		}
	}
	return nil
}

// jobFinished reports whether job has completed or failed.
func jobFinished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// probes runs the HTTP measurements of verification checks in goroutines,
// so that a slow endpoint never holds one of the controller's workers
// (and its stage's lock) for its timeout. A reconcile starts a measurement and returns; the goroutine
// keeps the result and wakes the promotion through Wake; the next
// reconcile collects it. A result stays until the verification ends, so
// that a reconcile that read the promotion from a cache a patch behind
// collects the same measurement again instead of calling the endpoint a
// second time. Results live in memory only: an operator that restarts
// takes the measurement again.
type probes struct {
	mu   sync.Mutex
	runs map[probeKey]*probe
	// begun is when each run of checks began, for the same reason: a
	// reconcile a patch behind starts it at the same time.
	begun map[runKey]time.Time
	// wake carries the promotions whose measurement ended; the
	// controller watches it (SetupWithManager).
	wake chan event.GenericEvent
	// strict makes the calls, linkLocal those of checks that allow
	// link-local addresses (verify.NewHTTPClient).
	strict, linkLocal *http.Client
}

// checkRun names one run of the stage's checks within a promotion: its
// verification once every Stack is deployed (wave 0), or the checks of a
// wave (rollout.verifyEachWave), by wave and attempt.
type checkRun struct {
	wave, attempt int32
}

// runKey names one run of checks of a promotion (by UID, so that a
// promotion deleted and created again under its name starts over).
type runKey struct {
	promotion types.UID
	checkRun
}

// probeKey names one measurement: measurement n of a check in a run.
type probeKey struct {
	run   runKey
	check string
	n     int32
}

// probe is one measurement, running or done.
type probe struct {
	started, ended time.Time
	done           bool
	result         verify.Result
}

// forgetAfter is how long a result, or the start of a verification, is
// kept when nobody forgets it (its promotion was deleted or ended
// otherwise): far longer than a cache stays a patch behind.
const forgetAfter = time.Hour

func newProbes() *probes {
	return &probes{
		runs:      map[probeKey]*probe{},
		begun:     map[runKey]time.Time{},
		wake:      make(chan event.GenericEvent, 1024),
		strict:    verify.NewHTTPClient(false),
		linkLocal: verify.NewHTTPClient(true),
	}
}

// prober returns the reconciler's probes, made on first use when
// SetupWithManager did not (nothing then wakes a promotion early: it
// looks again after the call's timeout).
func (r *Reconciler) prober() *probes {
	if r.probes == nil {
		r.probes = newProbes()
	}
	return r.probes
}

// begin returns when run began: now, the first time it is asked.
func (p *probes) begin(run runKey, now time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.begun[run]; ok {
		return t
	}
	for k, t := range p.begun {
		if now.Sub(t) > forgetAfter {
			delete(p.begun, k)
		}
	}
	p.begun[run] = now
	return now
}

// poll returns the result of measurement key once it is done; started is
// when it began, zero when it never did.
func (p *probes) poll(key probeKey) (res verify.Result, started time.Time, done bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	run := p.runs[key]
	if run == nil {
		return verify.Result{}, time.Time{}, false
	}
	return run.result, run.started, run.done
}

// start begins measurement key of the promotion target, at now.
func (p *probes) start(key probeKey, target types.NamespacedName, now time.Time, req verify.HTTPRequest, conds *verify.Conditions) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, run := range p.runs {
		if run.done && now.Sub(run.ended) > forgetAfter {
			delete(p.runs, k)
		}
	}
	run := &probe{started: now}
	p.runs[key] = run
	go func() {
		client := p.strict
		if req.AllowLinkLocal {
			client = p.linkLocal
		}
		res := verify.MeasureHTTP(context.Background(), client, req, conds)
		p.mu.Lock()
		run.result, run.done, run.ended = res, true, time.Now()
		p.mu.Unlock()
		obj := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: target.Namespace, Name: target.Name}}
		select {
		case p.wake <- event.GenericEvent{Object: obj}:
		default: // full: the promotion's own requeue comes soon enough
		}
	}()
}

// forget drops what is known of the measurements of run, once it has
// ended.
func (p *probes) forget(run runKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.runs {
		if k.run == run {
			delete(p.runs, k)
		}
	}
	delete(p.begun, run)
}
