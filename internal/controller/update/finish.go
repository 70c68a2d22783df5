package update

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// recordOutcome writes a finished run's outcome: the outputs Secret and a
// preview's plan Secret first, then the status that names them. Both are idempotent, so a reconcile that
// fails half way is completed by the next; the run leaves the registry
// only once the status is written (see finish), which is what makes the
// outcome written exactly once.
func (r *Reconciler) recordOutcome(ctx context.Context, s *session) (sreconcile.Result, error) {
	o := s.run.outcome
	obj, run := s.obj, s.run
	// A complete Update here means an earlier reconcile wrote the outcome
	// but did not learn that it had (its patch answered with an error);
	// it is not written again.
	if !obj.Status.IsComplete() {
		name, note, err := r.ensureOutputsSecret(ctx, obj, o)
		if err != nil {
			return sreconcile.ResultEmpty, sreconcile.NewGeneric("", err)
		}
		plan, planNote, err := r.ensurePlanSecret(ctx, obj, o)
		if err != nil {
			return sreconcile.ResultEmpty, sreconcile.NewGeneric("", err)
		}
		o.apply(&obj.Status, obj.Generation, name, joinSentences(note, planNote))
		obj.Status.Plan = plan
		if obj.Status.Permalink == "" && r.Options.DashboardURL != "" {
			obj.Status.Permalink = DashboardPermalink(r.Options.DashboardURL, obj.Namespace, obj.Name)
		}
	}
	s.announce = append(s.announce, func(ctx context.Context) {
		r.release(ctx, run)
		r.Options.Metrics.ObserveUpdate(string(obj.Spec.Type), o.metricsResult(), o.end.Sub(o.start.Time))
		r.announceOutcome(ctx, obj, o)
	})
	return sreconcile.ResultRequeue, nil
}

// announceOutcome emits the event and the log line of a recorded outcome.
// Both carry the status message, from which secret values were scrubbed.
func (r *Reconciler) announceOutcome(ctx context.Context, obj *autov1alpha1.Update, o *outcome) {
	logger := log.FromContext(ctx)
	spec := &obj.Spec
	if o.recovery != "" {
		logger.Info("the agent repaired the stack before the operation", "recovery", o.recovery)
		r.event(obj, corev1.EventTypeWarning, EventRecovered, "Run", "before the %s of stack %s, %s", spec.Type, spec.StackName, o.recovery)
	}
	if !o.failed() {
		logger.Info("operation succeeded", "changes", describeChanges(o.changes), "events", o.events)
		r.progress(obj, EventSucceeded, "%s of stack %s succeeded: %s", spec.Type, spec.StackName, describeChanges(o.changes))
		return
	}
	logger.Info("operation failed", "reason", o.reason, "agentReason", string(o.agentReason), "message", obj.Status.Message)
	r.event(obj, corev1.EventTypeWarning, o.reason, "Run",
		"%s of stack %s failed: %s", spec.Type, spec.StackName, obj.Status.Message)
}

// reconcileInterrupted finds an Update whose operation was started, by an
// earlier operator process, and never recorded: it is Progressing (not
// Pending) and no run of this process holds it. That operation is gone (the
// agent cancels an operation whose caller disconnects), so the Update is
// completed as failed with reason Interrupted, for its owner to retry.
func (r *Reconciler) reconcileInterrupted(ctx context.Context, s *session) (sreconcile.Result, error) {
	c := apimeta.FindStatusCondition(s.obj.Status.Conditions, autov1alpha1.UpdateConditionTypeProgressing)
	if c == nil || c.Status != metav1.ConditionTrue || s.obj.Status.NotStarted() {
		return sreconcile.ResultEmpty, nil
	}
	now := metav1.NewTime(r.now())
	st := &s.obj.Status
	st.MarkFailed(ReasonInterrupted, interruptedMessage)
	stampConditions(st, s.obj.Generation)
	st.Message = interruptedMessage
	st.EndTime = now
	obj := s.obj
	var ran time.Duration
	if !st.StartTime.IsZero() {
		ran = now.Sub(st.StartTime.Time)
	}
	s.announce = append(s.announce, func(ctx context.Context) {
		log.FromContext(ctx).Info("the operation was interrupted by an operator restart", "startTime", obj.Status.StartTime)
		r.event(obj, corev1.EventTypeWarning, ReasonInterrupted, "Run", "%s", interruptedMessage)
		r.Options.Metrics.ObserveUpdate(string(obj.Spec.Type), ResultInterrupted, ran)
	})
	return sreconcile.ResultRequeue, nil
}

// reconcileCompleted handles a finished Update: its finalizer goes (nothing
// runs any more), and once ttlAfterCompleted has passed since its end it is
// deleted, its outputs Secret with it through the owner reference.
func (r *Reconciler) reconcileCompleted(ctx context.Context, s *session) (sreconcile.Result, error) {
	if sreconcile.RemoveFinalizer(s.obj, autov1alpha1.UpdateFinalizer) && s.obj.DeletionTimestamp.IsZero() {
		// Expire in the next reconcile, once the finalizer is gone.
		return sreconcile.ResultRequeue, nil
	}
	ttl := s.obj.Spec.TtlAfterCompleted
	if ttl == nil || !s.obj.DeletionTimestamp.IsZero() {
		return sreconcile.ResultEmpty, nil
	}
	end := s.obj.Status.EndTime.Time
	if end.IsZero() {
		if c := apimeta.FindStatusCondition(s.obj.Status.Conditions, autov1alpha1.UpdateConditionTypeComplete); c != nil {
			end = c.LastTransitionTime.Time
		}
	}
	if left := end.Add(ttl.Duration).Sub(r.now()); left > 0 {
		s.requeueAfter = left
		return sreconcile.ResultRequeue, nil
	}
	uid := s.obj.UID
	if err := r.Client.Delete(ctx, s.obj, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return sreconcile.ResultEmpty, sreconcile.NewGeneric("", fmt.Errorf("deleting the expired Update: %w", err))
	}
	log.FromContext(ctx).Info("deleted the Update: its ttlAfterCompleted has passed", "ttl", ttl.Duration.String())
	r.event(s.obj, corev1.EventTypeNormal, EventExpired, "Delete",
		"deleted %s after ttlAfterCompleted %s", s.obj.Name, ttl.Duration)
	return sreconcile.ResultEmpty, nil
}

// reconcileDelete lets an Update that is not running go: it never started
// here, or an earlier operator process started it and its operation is
// gone with that process.
func (r *Reconciler) reconcileDelete(s *session) (sreconcile.Result, error) {
	sreconcile.RemoveFinalizer(s.obj, autov1alpha1.UpdateFinalizer)
	return sreconcile.ResultEmpty, nil
}
