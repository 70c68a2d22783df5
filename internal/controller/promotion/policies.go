package promotion

import (
	"context"
	"fmt"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/change/policy"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// reconcilePolicies evaluates the stage's policy rules (spec.policies) on
// the promotion's previews, while it is Pending and once every preview
// succeeded, and records the results in status.policies. It runs on every
// reconcile until the promotion starts, so the results always match the
// previews recorded: a Stack previewed again is judged again. A fired
// Refuse rule fails the promotion before anything changed, and marks the
// release failed in the stage, like a failed preview, so that
// auto-promotion does not ask for it again; fired RequireApproval rules
// are left to reconcileApproval. A rule that does not compile or evaluate
// fails the promotion too, naming the rule's field (the Stage controller
// stalls the stage for one that does not compile): only a person who
// governs the stage can fix it, and a gate that cannot be judged must not
// be passed. That failure is the stage's, not the release's: the release
// is not marked failed.
func (s *session) reconcilePolicies(ctx context.Context) (sreconcile.Result, error) {
	st := &s.p.Status
	if !s.pending() {
		return sreconcile.ResultEmpty, nil
	}
	for _, pv := range s.recs.previews {
		if pv.Summary == nil {
			st.Policies = nil
			return sreconcile.ResultEmpty, nil
		}
	}
	rules := s.stage.Spec.Policies
	if len(rules) == 0 {
		st.Policies = nil
		return sreconcile.ResultEmpty, nil
	}
	compiled, err := policy.Compile(rules)
	if err == nil {
		st.Policies, err = compiled.Evaluate(ctx, policy.FactsOf(s.p, s.recs.previews, s.release))
	}
	if err != nil {
		st.Policies = nil
		return s.refuse(ctx, fmt.Sprintf("stage %s: %v", s.stage.Name, err), false)
	}
	if r := policy.Refused(st.Policies); r != nil {
		return s.refuse(ctx, fmt.Sprintf("refused by policy %s: %s", r.Name, r.Message), true)
	}
	return sreconcile.ResultEmpty, nil
}

// refuse ends the Pending promotion as Failed with why, before anything
// changed; releaseFailed says the release failed in the stage.
func (s *session) refuse(ctx context.Context, why string, releaseFailed bool) (sreconcile.Result, error) {
	if err := s.deletePreviews(ctx, true); err != nil {
		return sreconcile.ResultEmpty, err
	}
	s.p.Status.Commit = s.release.Spec.Commit.SHA
	s.outcome, s.message, s.releaseFailed = promotionv1alpha1.PromotionFailed, why+"; nothing was changed", releaseFailed
	return s.recordOutcome(ctx)
}
