package pipelinectl

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/change"
)

// Request is a promotion a person asks for.
type Request struct {
	// Stage is the stage to promote into.
	Stage string
	// Release is the release to promote. Empty means, for a promotion, the
	// release auto-promotion would pick next; for a rollback, the newest
	// release verified in the stage other than the one it runs.
	Release string
	// Rollback marks the promotion as a rollback.
	Rollback bool
	// Reason says why, in the requester's words.
	Reason string
}

// Promote creates the Promotion req asks for, on behalf of the user the
// API server authenticates, and returns it. The Promotion controller does
// the rest; a refusal it can only find then (a frozen stage, a release of
// another pipeline) shows in the Promotion's status.
func (c *Client) Promote(ctx context.Context, req Request) (*promotionv1alpha1.Promotion, error) {
	stage, err := c.stage(ctx, req.Stage)
	if err != nil {
		return nil, err
	}
	release := req.Release
	switch {
	case release == "" && req.Rollback:
		if release, err = c.rollbackTarget(ctx, stage); err != nil {
			return nil, err
		}
	case release == "":
		if release, err = c.nextRelease(ctx, stage); err != nil {
			return nil, err
		}
	}
	user, err := c.WhoAmI(ctx)
	if err != nil {
		return nil, err
	}
	p := &promotionv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: stage.Name + "-",
			Namespace:    c.Namespace,
			Labels: map[string]string{
				promotionv1alpha1.PipelineLabel: stage.Spec.Pipeline,
				promotionv1alpha1.StageLabel:    stage.Name,
			},
		},
		Spec: promotionv1alpha1.PromotionSpec{
			Stage: stage.Name, Release: release, Rollback: req.Rollback, RequestedBy: user, Reason: req.Reason,
		},
	}
	if err := c.Client.Create(ctx, p); err != nil {
		return nil, fmt.Errorf("creating the promotion: %w", err)
	}
	return p, nil
}

// nextRelease is the release the stage would promote next, by the same
// choice auto-promotion makes (change.Select): available to the stage,
// newer than what it verified, never one that failed there.
func (c *Client) nextRelease(ctx context.Context, st *promotionv1alpha1.Stage) (string, error) {
	releases, err := c.releases(ctx, st.Spec.Pipeline)
	if err != nil {
		return "", err
	}
	current := ""
	if cur := st.Status.CurrentRelease; cur != nil {
		current = cur.Name
	}
	sel := change.Select(st, releases, current, c.now())
	if sel.Release == nil {
		why := cmp.Or(sel.Waiting, "it runs the newest available release")
		return "", fmt.Errorf("stage %q has no release to promote next (%s); name one (see `stackyard releases %s`)", st.Name, why, st.Spec.Pipeline)
	}
	return sel.Release.Name, nil
}

// rollbackTarget is the newest release verified in stage, by when it was
// verified there, other than the one the stage runs.
func (c *Client) rollbackTarget(ctx context.Context, stage *promotionv1alpha1.Stage) (string, error) {
	releases, err := c.releases(ctx, stage.Spec.Pipeline)
	if err != nil {
		return "", err
	}
	current := ""
	if cur := stage.Status.CurrentRelease; cur != nil {
		current = cur.Name
	}
	releases = slices.DeleteFunc(releases, func(r promotionv1alpha1.Release) bool {
		_, verified := r.Status.VerifiedIn[stage.Name]
		return !verified || r.Name == current
	})
	if len(releases) == 0 {
		return "", fmt.Errorf("stage %q has no earlier verified release to roll back to", stage.Name)
	}
	newest := slices.MaxFunc(releases, func(a, b promotionv1alpha1.Release) int {
		return a.Status.VerifiedIn[stage.Name].Since.Time.Compare(b.Status.VerifiedIn[stage.Name].Since.Time)
	})
	return newest.Name, nil
}

// Wait polls p every interval until its phase is final, and returns it
// as it ended; it gives up when ctx ends.
func (c *Client) Wait(ctx context.Context, p *promotionv1alpha1.Promotion, interval time.Duration) (*promotionv1alpha1.Promotion, error) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return nil, err
		}
		if p.Status.Phase.IsFinished() {
			return p, nil
		}
		select {
		case <-ctx.Done():
			return p, fmt.Errorf("promotion %s is still %s: %w", p.Name, p.Status.Phase, ctx.Err())
		case <-ticker.C:
		}
	}
}
