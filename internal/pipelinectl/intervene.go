package pipelinectl

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// Intervene records an Intervention (halt, resume or abort) on the
// running promotion named promotion, on behalf of the user the API server
// authenticates, and returns it. The API server admits it only from a
// user allowed the verb "operate" on the promotion's stage
// (config/policy); the Promotion controller acts on it once and lists it
// in status.rollout.interventions. It is owned by the Promotion, so it
// goes when retention deletes the promotion.
func (c *Client) Intervene(ctx context.Context, promotion string, action promotionv1alpha1.InterventionAction, reason string) (*promotionv1alpha1.Intervention, error) {
	p := &promotionv1alpha1.Promotion{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: promotion}, p); err != nil {
		return nil, fmt.Errorf("promotion %q: %w", promotion, err)
	}
	if p.Status.Phase != promotionv1alpha1.PromotionRunning {
		return nil, fmt.Errorf("promotion %s is %s: only a promotion that runs can be halted, resumed or aborted", p.Name, orPending(p.Status.Phase))
	}
	who, err := c.Identity(ctx)
	if err != nil {
		return nil, err
	}
	in := &promotionv1alpha1.Intervention{
		ObjectMeta: ownedBy(p),
		Spec: promotionv1alpha1.InterventionSpec{
			Promotion: p.Name, Stage: p.Spec.Stage, Action: action, User: who.User, Reason: reason,
		},
	}
	if err := c.Client.Create(ctx, in); err != nil {
		return nil, fmt.Errorf("recording your %s of promotion %s: %w", action, p.Name, err)
	}
	return in, nil
}

// orPending is the phase, or Pending for a promotion without one yet.
func orPending(phase promotionv1alpha1.PromotionPhase) promotionv1alpha1.PromotionPhase {
	if phase == "" {
		return promotionv1alpha1.PromotionPending
	}
	return phase
}
