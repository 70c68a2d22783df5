package pipelinectl

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// Decision is what a person decides on a promotion waiting for approval.
type Decision struct {
	// Promotion is the Promotion's name.
	Promotion string
	// Reject rejects the promotion instead of approving it.
	Reject bool
	// Comment says why; required to reject.
	Comment string
	// PlanDigest, when set, is the plan digest the person reviewed: the
	// decision is refused when the promotion's plan has changed since.
	PlanDigest string
	// Wave, when set, is the wave of a running rollout the person decides
	// on: the decision is refused unless that wave waits for approval.
	Wave int32
}

// Decide records d as an Approval, on behalf of the user the API server
// authenticates, with that user's groups, for the promotion's stage and
// current plan digest, and returns it: on the promotion while it is
// Pending, or on the wave of its rollout that waits for approval while it
// runs (rollout.approveEachWave). The API server admits it only from
// a user allowed the verb "approve" on the stage (config/policy); the
// Promotion controller counts it while the promotion's plan digest stays
// the same. The Approval is owned by the Promotion, so it goes when
// retention deletes the promotion.
func (c *Client) Decide(ctx context.Context, d Decision) (*promotionv1alpha1.Approval, error) {
	if d.Reject && d.Comment == "" {
		return nil, errors.New("a rejection needs a reason: give it with -m")
	}
	p := &promotionv1alpha1.Promotion{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: d.Promotion}, p); err != nil {
		return nil, fmt.Errorf("promotion %q: %w", d.Promotion, err)
	}
	wave := p.WaveAwaitingApproval()
	switch st := p.Status; {
	case d.Wave != 0 && d.Wave != wave:
		return nil, fmt.Errorf("promotion %s: wave %d does not wait for approval (%s)", p.Name, d.Wave, orNone(st.Message))
	case st.Phase == promotionv1alpha1.PromotionRunning && wave == 0:
		return nil, fmt.Errorf("promotion %s is Running and no wave of it waits for approval: there is nothing to decide now", p.Name)
	case st.Phase.IsFinished():
		return nil, fmt.Errorf("promotion %s is %s: there is nothing left to decide", p.Name, st.Phase)
	case st.PlanDigest == "":
		return nil, fmt.Errorf("promotion %s has nothing to approve yet (%s): its plan is decided once it is next in stage %s",
			p.Name, orNone(st.Message), p.Spec.Stage)
	}
	if d.PlanDigest != "" && d.PlanDigest != p.Status.PlanDigest {
		return nil, fmt.Errorf("promotion %s: its plan changed since you reviewed it (%s, now %s); review it again", p.Name, d.PlanDigest, p.Status.PlanDigest)
	}
	who, err := c.Identity(ctx)
	if err != nil {
		return nil, err
	}
	decision := promotionv1alpha1.Approve
	if d.Reject {
		decision = promotionv1alpha1.Reject
	}
	a := &promotionv1alpha1.Approval{
		ObjectMeta: ownedBy(p),
		Spec: promotionv1alpha1.ApprovalSpec{
			Promotion: p.Name, Stage: p.Spec.Stage, PlanDigest: p.Status.PlanDigest, Wave: wave, Decision: decision,
			User: who.User, Groups: who.Groups, Comment: d.Comment,
		},
	}
	if err := c.Client.Create(ctx, a); err != nil {
		return nil, fmt.Errorf("recording your decision on promotion %s: %w", p.Name, err)
	}
	return a, nil
}

// ownedBy is the metadata of a record about promotion p (an Approval, an
// Intervention): named after it, labelled with it and its stage, and
// owned by it, so that it goes when retention deletes the promotion.
func ownedBy(p *promotionv1alpha1.Promotion) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		GenerateName: p.Name + "-",
		Namespace:    p.Namespace,
		Labels: map[string]string{
			promotionv1alpha1.PromotionLabel: p.Name,
			promotionv1alpha1.StageLabel:     p.Spec.Stage,
		},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: promotionv1alpha1.GroupVersion.String(), Kind: "Promotion", Name: p.Name, UID: p.UID,
		}},
	}
}

// orNone is s, or "no message".
func orNone(s string) string {
	if s == "" {
		return "no message"
	}
	return s
}
