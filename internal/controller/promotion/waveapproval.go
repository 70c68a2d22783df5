package promotion

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// approveWave reports whether wave may begin under the approval policy the
// promotion recorded when it started (rollout.approveEachWave), once the
// wave before it has deployed, passed its checks and paused. The wait is
// recorded in status.rollout.approval when it begins: only Approvals of
// the wave created in that second or later count (tally, on the
// promotion's plan digest), so that approvers decide on what the waves
// before did; a rejection counts whenever it was made. While too few
// count it sets the wait (status.reason AwaitingApproval), and an
// eligible rejection ends the promotion Aborted: nothing updates between
// waves, so the Stacks not reached are Skipped at once. An automatic
// rollback goes on without them where the policy skips rollbacks' approvals.
func (s *session) approveWave(ctx context.Context, wave int32) (bool, error) {
	ro := s.p.Status.Rollout
	policy := ro.ApprovalPolicy
	if policy == nil {
		// Only a stage without spec.approval, which its CEL rule refuses
		// with approveEachWave, records none: the wave waits for a person
		// to resume or abort rather than go on unapproved.
		s.wait = sreconcile.NewWaiting(promotionv1alpha1.PromotionReasonAwaitingApproval,
			fmt.Errorf("wave %d of %d waits for approval, but the promotion recorded no approval policy when it started: abort it and promote again", wave, ro.Waves), approvalWait)
		return false, nil
	}
	if s.p.Spec.Rollback && s.p.Spec.RequestedBy == promotionv1alpha1.RequestedByAutoPromotion && policy.SkipForRollback {
		return true, nil
	}
	if a := ro.Approval; a == nil || a.Wave != wave {
		// To the second, as the Approvals' creation times are.
		ro.Approval = &promotionv1alpha1.WaveApproval{Wave: wave, Since: metav1.NewTime(s.now.Truncate(time.Second))}
		s.event(corev1.EventTypeNormal, promotionv1alpha1.EventPromotionAwaitingApproval,
			fmt.Sprintf("wave %d of %d of release %s into stage %s waits for approval", wave, ro.Waves, s.p.Spec.Release, s.p.Spec.Stage))
	}
	wa := ro.Approval
	if wa.ApprovedTime != nil {
		return true, nil
	}
	all, err := s.listApprovals(ctx)
	if err != nil {
		return false, err
	}
	since := make([]promotionv1alpha1.Approval, 0, len(all))
	early := 0
	for _, a := range all {
		switch {
		case a.Spec.Decision == promotionv1alpha1.Reject || !a.CreationTimestamp.Before(&wa.Since):
			since = append(since, a)
		case a.Spec.Wave == wave && a.Spec.Promotion == s.p.Name && a.Spec.Stage == s.p.Spec.Stage:
			// Made before the wave began to wait, so before its
			// approvers could see what the waves before it did.
			early++
		}
	}
	editor, err := s.changeEditor(ctx)
	if err != nil {
		return false, err
	}
	t := tally(policy, nil, s.p, wave, since, s.now, editor)
	wa.Approvals = t.records()
	if r := t.rejected; r != nil {
		for i := range s.p.Status.Stacks {
			if ps := &s.p.Status.Stacks[i]; ps.State == promotionv1alpha1.StackPending {
				ps.State = promotionv1alpha1.StackSkipped
			}
		}
		s.outcome = promotionv1alpha1.PromotionAborted
		s.message = fmt.Sprintf("wave %d rejected by %s: %s; %s", wave, r.Spec.User, r.Spec.Comment, s.whereStacksAre())
		return false, nil
	}
	if !t.approved() {
		ignored := ""
		if early > 0 {
			ignored = fmt.Sprintf(" (%d approval(s) of this wave made before it began to wait at %s do not count: approve it again)",
				early, wa.Since.UTC().Format(time.RFC3339))
		}
		s.wait = sreconcile.NewWaiting(promotionv1alpha1.PromotionReasonAwaitingApproval,
			fmt.Errorf("wave %d of %d %s%s; %s", wave, ro.Waves, t.message(), ignored, describeCounts(countStates(s.p.Status.Stacks))), t.recheck(s.now))
		return false, nil
	}
	now := metav1.NewTime(s.now)
	wa.ApprovedTime = &now
	return true, nil
}
