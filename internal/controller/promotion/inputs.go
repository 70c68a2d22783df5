package promotion

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// EventPreviewAgain is the reason of the event that says a promotion
// previews Stacks again because their inputs changed.
const EventPreviewAgain = "PreviewAgain"

// maxPreviewRounds bounds how many times one Stack is previewed in one
// promotion: inputs that keep changing faster than a preview runs fail
// the promotion rather than preview for ever.
const maxPreviewRounds = 5

// previewAgainWait is how soon a promotion that reset previews looks again
// to start the new ones.
const previewAgainWait = time.Second

// reconcileInputs runs once every preview of a Pending promotion has
// ended, right before the approvals are counted and the promotion starts.
// It compares what each Stack reads now (its spec and the versions of the
// Secrets and ConfigMaps it reads) with what it read when its preview
// started. A Stack whose inputs changed is previewed again, in a new
// round: the plan its up would be held to was made from the old inputs,
// and would refuse the up ("violates plan") after people approved it. The
// new plan changes the plan digest, so the approvals given for the old one
// stop counting and the approvers are asked again, for the plan that will
// run.
func (s *session) reconcileInputs(ctx context.Context) (sreconcile.Result, error) {
	if !s.pending() {
		return sreconcile.ResultEmpty, nil
	}
	changed, err := s.changedInputs(ctx)
	if err != nil {
		return sreconcile.ResultEmpty, err
	}
	var again []string
	for _, i := range changed {
		pv := &s.recs.previews[i]
		if pv.Round >= maxPreviewRounds {
			s.end(promotionv1alpha1.PromotionFailed, fmt.Sprintf("the inputs of Stack %s changed again after %d previews; "+
				"nothing was changed; promote again once its Secrets, ConfigMaps and spec are stable", pv.Name, pv.Round))
			return sreconcile.ResultSuccess, nil
		}
		*pv = promotionv1alpha1.StackPreview{Name: pv.Name, Round: max(pv.Round, 1) + 1}
		again = append(again, pv.Name)
	}
	if len(again) == 0 {
		return sreconcile.ResultEmpty, nil
	}
	msg := fmt.Sprintf("the inputs of Stack %s changed since its preview (its spec, or a Secret or ConfigMap it reads); "+
		"previewing again, and the new plan needs new approvals", strings.Join(again, ", "))
	s.event(corev1.EventTypeNormal, EventPreviewAgain, msg)
	return sreconcile.ResultEmpty, sreconcile.NewWaiting(ReasonPreviewing, fmt.Errorf("%s", msg), previewAgainWait)
}

// changedInputs returns the indexes of the previews whose Stack reads, now
// (live), other inputs than when its preview started.
func (s *session) changedInputs(ctx context.Context) ([]int, error) {
	var changed []int
	for i := range s.recs.previews {
		pv := &s.recs.previews[i]
		if pv.Inputs == "" || pv.Summary == nil {
			// Recorded before previews recorded their inputs, or not
			// previewed: nothing to compare.
			continue
		}
		stack, err := get(ctx, s.r.APIReader, s.p.Namespace, "Stack", pv.Name, &pulumiv1.Stack{})
		if err != nil {
			return nil, err
		}
		if stack == nil {
			// startPromotion fails the promotion for it.
			continue
		}
		now, err := change.StackDigest(ctx, s.r.APIReader, stack)
		if err != nil {
			return nil, err
		}
		if now != pv.Inputs {
			changed = append(changed, i)
		}
	}
	return changed, nil
}
