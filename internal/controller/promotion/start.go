package promotion

import (
	"context"
	"fmt"

	"github.com/stackyard/stackyard/internal/change"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// startPromotion turns a Pending promotion whose turn has come into a
// Running one: it checks that every Stack of the stage exists, belongs to
// the stage and can be pinned, records each one's spec.commit before the
// promotion, and asks for a requeue, so that this record is stored before
// pinStacks changes any Stack. A Stack that cannot be pinned fails the
// promotion before anything is changed.
func (s *session) startPromotion(ctx context.Context) (sreconcile.Result, error) {
	if !s.pending() {
		return sreconcile.ResultEmpty, nil
	}
	// The approvals were counted on a live list, after reconcileInputs
	// compared the inputs: an input that changed in between, before an
	// approval of the old plan arrived, is caught here, after the count,
	// and the next reconcile previews again.
	changed, err := s.changedInputs(ctx)
	if err != nil {
		return sreconcile.ResultEmpty, err
	}
	if len(changed) > 0 {
		return sreconcile.ResultEmpty, sreconcile.NewWaiting(ReasonPreviewing,
			fmt.Errorf("the inputs of Stack %s changed while the approvals were counted; previewing again", s.recs.previews[changed[0]].Name), previewAgainWait)
	}
	if s.stage.Spec.PreviewOnly {
		// Previewed and approved: a preview stage pins nothing.
		return s.finishPreviewOnly(ctx)
	}
	sha := s.release.Spec.Commit.SHA
	recorded := make([]promotionv1alpha1.PromotedStack, 0, len(s.targets()))
	labels := make(map[string]map[string]string, len(s.targets()))
	for _, b := range s.targets() {
		// Read live: the commit recorded as previous is the one the Stack
		// has now, whatever the cache says.
		stack, err := get(ctx, s.r.APIReader, s.p.Namespace, "Stack", b.Name, &pulumiv1.Stack{})
		if err != nil {
			return sreconcile.ResultEmpty, err
		}
		if stack != nil {
			if msg := change.Unauthorized(s.stage.Name, b.Name, stack.Annotations); msg != "" {
				return s.abort("spec.stage: %s", msg)
			}
		}
		if err := pinnable(b.Name, stack); err != nil {
			s.end(promotionv1alpha1.PromotionFailed, err.Error())
			return sreconcile.ResultSuccess, nil
		}
		recorded = append(recorded, promotionv1alpha1.PromotedStack{Name: b.Name, PreviousCommit: stack.Spec.Commit, Commit: sha})
		labels[b.Name] = stack.Labels
	}
	// The order and the waves are decided once, from the labels the
	// Stacks have now: relabelling a Stack later moves it in no rollout
	// that runs.
	ordered, err := s.planRollout(recorded, labels)
	if err != nil {
		return s.abort("spec.stage: Stage %q: %v", s.stage.Name, err)
	}
	now := metav1.NewTime(s.now)
	st := &s.p.Status
	st.Phase, st.StartTime, st.Commit, st.Stacks = promotionv1alpha1.PromotionRunning, &now, sha, ordered
	st.Message = fmt.Sprintf("pinning %d Stacks to %s", len(recorded), sha)
	if ro := st.Rollout; ro != nil {
		st.Message = fmt.Sprintf("rolling %d Stacks out to %s in %d waves", len(recorded), sha, ro.Waves)
	}
	s.event(corev1.EventTypeNormal, promotionv1alpha1.EventPromotionStarted, fmt.Sprintf("promoting release %s (%s) into stage %s", s.p.Spec.Release, change.ShortCommit(sha), s.stage.Name))
	return sreconcile.ResultRequeue, nil
}

// pinnable says why the Stack named name (nil when missing) cannot be
// pinned to a commit by a promotion, or nil when it can.
func pinnable(name string, stack *pulumiv1.Stack) error {
	switch {
	case stack == nil:
		return fmt.Errorf("Stack %q not found", name)
	case stack.Spec.ProgramRef != nil:
		return fmt.Errorf("Stack %q deploys Program %q (spec.programRef): promoting a Program-backed Stack is not supported yet",
			name, stack.Spec.ProgramRef.Name)
	case stack.Spec.FluxSource != nil:
		return fmt.Errorf("Stack %q deploys a Flux source (spec.fluxSource): promoting it is not supported yet", name)
	case stack.Spec.GitSource == nil || stack.Spec.ProjectRepo == "":
		return fmt.Errorf("Stack %q has no git source: set spec.projectRepo and pin spec.commit", name)
	case stack.Spec.Branch != "":
		return fmt.Errorf("Stack %q tracks spec.branch %q, which a commit cannot be pinned beside: pin spec.commit instead (and remove spec.branch)",
			name, stack.Spec.Branch)
	}
	return nil
}
