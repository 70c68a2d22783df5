package stage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// AutoPromotionReason is spec.reason of the promotions auto-promotion
// creates.
const AutoPromotionReason = "auto-promotion"

// reconcileAutoPromotion asks for the promotion of the release
// reconcileAvailability picked, under a name derived from the stage, the
// release and the release the stage runs (AutoPromotionName): a reconcile
// that finds the promotion already there, because an earlier one created
// it and the cache has not shown it yet, does nothing more. If that
// promotion was aborted, auto-promotion does not ask again for the same
// move, and says so.
func (s *session) reconcileAutoPromotion(ctx context.Context) (sreconcile.Result, error) {
	if s.pick == nil {
		return sreconcile.ResultEmpty, nil
	}
	st := &s.stage.Status
	name := AutoPromotionName(s.stage.Name, s.pick.Name, st.CurrentRelease)
	if p := s.promotions[name]; p != nil {
		switch {
		case p.Status.Phase.IsFinished():
			st.WaitingFor = fmt.Sprintf("release %s: auto-promotion %s was %s (%s); promote it by hand", s.pick.Name, name, p.Status.Phase, p.Status.Message)
		case p.Status.Message != "":
			st.WaitingFor = fmt.Sprintf("promotion %s pending: %s", name, p.Status.Message)
		default:
			st.WaitingFor = fmt.Sprintf("promotion %s pending", name)
		}
		return sreconcile.ResultEmpty, nil
	}
	p := s.newPromotion(name, s.pick.Name, AutoPromotionReason)
	err := s.r.Client.Create(ctx, p)
	switch {
	case apierrors.IsAlreadyExists(err):
	case err != nil:
		return sreconcile.ResultEmpty, sreconcile.NewGeneric("", fmt.Errorf("creating promotion %s of release %s: %w", name, s.pick.Name, err))
	default:
		s.event(p, corev1.EventTypeNormal, EventAutoPromotion, fmt.Sprintf("asked for promotion %s of release %s", name, s.pick.Name))
	}
	st.WaitingFor = fmt.Sprintf("promotion %s pending", name)
	return sreconcile.ResultSuccess, nil
}

// newPromotion is the Promotion named name of release into the stage that
// the operator asks for by itself, for reason.
func (s *session) newPromotion(name, release, reason string) *promotionv1alpha1.Promotion {
	return &promotionv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: s.stage.Namespace,
			Labels: map[string]string{promotionv1alpha1.PipelineLabel: s.stage.Spec.Pipeline, promotionv1alpha1.StageLabel: s.stage.Name},
		},
		Spec: promotionv1alpha1.PromotionSpec{
			Stage: s.stage.Name, Release: release, RequestedBy: promotionv1alpha1.RequestedByAutoPromotion, Reason: reason,
		},
	}
}

// AutoPromotionName is the name of the promotion auto-promotion asks for to
// move stage from current (nil: nothing) to release: the stage's name and a
// digest of the move, so the same move always has the same name and a new
// one a new name.
func AutoPromotionName(stage, release string, current *promotionv1alpha1.StageRelease) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s", stage, release)
	if current != nil {
		fmt.Fprintf(h, "\x00%s\x00%s\x00%s", current.Name, current.Promotion, current.Since.UTC().Format(time.RFC3339))
	}
	return stage + "-" + hex.EncodeToString(h.Sum(nil))[:10]
}

// autoPromotes reports whether auto-promotion is on for stage.
func autoPromotes(stage *promotionv1alpha1.Stage) bool {
	o := stage.Spec.AutoPromotionOptions
	return o != nil && o.Enabled
}
