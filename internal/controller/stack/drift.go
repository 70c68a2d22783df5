package stack

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/stackrun"
)

// Drift detection (spec.driftDetection): a Stack that is up to date gets,
// every interval, an Update that previews with refresh. A preview changes
// nothing, and after a refresh it shows what an update would do to bring
// the resources back to the program: that is the drift. The result goes to
// status.lastDriftCheck, the DriftDetected condition and an event; only with
// remediate does a drift start an update (trigger DriftDetected).

// triggerDriftCheck is the trigger recorded on drift-check Updates.
const triggerDriftCheck = "DriftCheck"

// DefaultDriftInterval is the time between drift checks when
// spec.driftDetection.intervalSeconds is not set.
const DefaultDriftInterval = time.Hour

// Reasons of the DriftDetected condition.
const (
	// DriftReasonDrifted: the last check found drift.
	DriftReasonDrifted = "Drifted"
	// DriftReasonInSync: the last check found none.
	DriftReasonInSync = "InSync"
	// DriftReasonCheckFailed: the last check could not run.
	DriftReasonCheckFailed = "CheckFailed"
	// DriftReasonRemediated: an update ran after the drift was found.
	DriftReasonRemediated = "Remediated"
)

// driftInterval is the time between two drift checks of spec.
func driftInterval(spec *shared.StackSpec, floor time.Duration) time.Duration {
	if floor <= 0 {
		floor = DefaultMinResync
	}
	return sreconcile.Interval(spec.DriftDetection.IntervalSeconds, DefaultDriftInterval, floor)
}

// driftToRemediate reports whether the last drift check found drift that
// no update has undone yet and the spec asks for remediation.
func driftToRemediate(stack *pulumiv1.Stack) bool {
	dd, check, last := stack.Spec.DriftDetection, stack.Status.LastDriftCheck, stack.Status.LastUpdate
	return dd != nil && dd.Remediate && check != nil && check.Drifted &&
		(last == nil || check.Time.After(last.LastResyncTime.Time))
}

// isDriftCheck reports whether an Update is a drift check.
func isDriftCheck(upd *autov1alpha1.Update) bool {
	return upd.Annotations[stackrun.TriggerAnnotation] == triggerDriftCheck
}

// reconcileDrift starts a drift check when the Stack is up to date and
// the interval since the last check (or the last update) has passed;
// otherwise it makes sure the Stack is looked at again when it will have.
// A check deploys nothing: the chain goes on and the Stack stays Ready.
func (s *session) reconcileDrift(ctx context.Context) (sreconcile.Result, error) {
	stack := s.stack
	last := stack.Status.LastUpdate
	if stack.Spec.DriftDetection == nil || stack.Spec.Preview || s.decision.Stalled || conflictStalled(stack) ||
		last == nil || last.State != shared.SucceededStackStateMessage || last.Generation != stack.Generation {
		return sreconcile.ResultEmpty, nil
	}
	since := last.LastResyncTime.Time
	if check := stack.Status.LastDriftCheck; check != nil && check.Time.After(since) {
		since = check.Time.Time
	}
	interval := driftInterval(&stack.Spec, s.r.MinResync)
	if wait := sreconcile.Remaining(since, interval, s.now); wait > 0 {
		if s.decision.RequeueAfter == 0 || wait < s.decision.RequeueAfter {
			s.decision.RequeueAfter = wait
		}
		return sreconcile.ResultEmpty, nil
	}
	if reclaimWorkspace(stack) {
		if err := s.applyWorkspace(ctx, applyAlways); err != nil {
			return sreconcile.ResultEmpty, err
		}
	}
	upd := stackrun.BuildUpdate(stack, stackrun.UpdateFor{Revision: s.src.Revision, Type: autov1alpha1.PreviewType, Trigger: triggerDriftCheck})
	upd.Spec.Refresh = ptr.To(true)
	upd.Spec.Target, upd.Spec.TargetDependents = nil, nil
	return sreconcile.ResultEmpty, s.startUpdate(ctx, upd)
}

// driftCheckRunning is the end of a reconcile while a drift check runs. A
// check deploys nothing, so the Stack stays Ready while it runs; a spec
// change or reconcile request that came meanwhile waits for it to end
// (the check's result is recorded first), and is not reported as handled.
func (s *session) driftCheckRunning() error {
	if last := s.stack.Status.LastUpdate; last != nil && last.Generation == s.stack.Generation && last.ReconcileRequest == reconcileRequest(s.stack) {
		return sreconcile.NewIgnore("DriftCheckRunning", nil)
	}
	return sreconcile.NewWaiting(pulumiv1.ReconcilingProcessingReason,
		fmt.Errorf("waiting for drift check %s to finish", s.stack.Status.CurrentUpdate.Name), ResyncInterval(&s.stack.Spec, s.r.MinResync))
}

// recordDriftCheck writes a finished drift check's result. It leaves
// lastUpdate alone: a check deploys nothing.
func (s *session) recordDriftCheck(upd *autov1alpha1.Update, failed bool) {
	st := &s.stack.Status
	check := &shared.DriftCheck{Time: metav1.NewTime(s.now), Name: upd.Name, Changes: upd.Status.Changes, Failed: failed}
	cond := metav1.Condition{Type: pulumiv1.DriftDetectedCondition, ObservedGeneration: s.stack.Generation}
	switch drift := describeDrift(upd.Status.Changes); {
	case failed:
		check.Message = "the drift check failed: " + upd.Status.Message
		cond.Status, cond.Reason = metav1.ConditionUnknown, DriftReasonCheckFailed
		s.warn(DriftReasonCheckFailed, check.Message)
	case drift != "":
		check.Drifted = true
		check.Message = "the resources no longer match the deployment; an update would " + drift
		if !s.stack.Spec.DriftDetection.Remediate {
			check.Message += " (not remediated: spec.driftDetection.remediate is off)"
		}
		cond.Status, cond.Reason = metav1.ConditionTrue, DriftReasonDrifted
		s.warn(pulumiv1.DriftDetectedCondition, check.Message)
	default:
		check.Message = "no drift: the resources match the deployment"
		cond.Status, cond.Reason = metav1.ConditionFalse, DriftReasonInSync
		s.event(corev1.EventTypeNormal, DriftReasonInSync, check.Message)
	}
	cond.Message = check.Message
	apimeta.SetStatusCondition(&st.Conditions, cond)
	st.LastDriftCheck = check
	s.appendHistory(upd, &shared.StackUpdateState{
		State:               stateOf(failed),
		Generation:          s.stack.Generation,
		ReconcileRequest:    reconcileRequest(s.stack),
		LastAttemptedCommit: st.CurrentUpdate.Commit,
	}, "")
}

// clearDriftAfterUpdate marks drift as undone once a successful up ran
// after it was found.
func (s *session) clearDriftAfterUpdate(upd *autov1alpha1.Update) {
	c := apimeta.FindStatusCondition(s.stack.Status.Conditions, pulumiv1.DriftDetectedCondition)
	if c == nil || c.Status != metav1.ConditionTrue || upd.Spec.Type != autov1alpha1.UpType {
		return
	}
	apimeta.SetStatusCondition(&s.stack.Status.Conditions, metav1.Condition{
		Type: pulumiv1.DriftDetectedCondition, Status: metav1.ConditionFalse, Reason: DriftReasonRemediated,
		ObservedGeneration: s.stack.Generation,
		Message:            fmt.Sprintf("update %s brought the resources back to the program", upd.Name),
	})
}

// describeDrift renders the non-"same" change counts ("update 1, delete 2"),
// or "" when there are none.
func describeDrift(changes map[string]int64) string {
	var parts []string
	for op, n := range changes {
		if op != "same" && n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", op, n))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func stateOf(failed bool) shared.StackUpdateStateMessage {
	if failed {
		return shared.FailedStackStateMessage
	}
	return shared.SucceededStackStateMessage
}
