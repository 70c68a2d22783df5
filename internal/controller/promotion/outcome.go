package promotion

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// ReasonRecordFailed is the reason of a failed write of the outcome to a
// Release, retried with backoff.
const ReasonRecordFailed = "RecordFailed"

// recordOutcome writes the outcome observeStacks or pinStacks found: first
// on the Release (and, for a success, on the release the stage ran
// before), then, once that is stored, on the Promotion, in the deferred
// patch. A reconcile killed in between finds the promotion still Running,
// observes the same outcome and writes the same again.
//
//   - Succeeded: the release's currentlyIn and verifiedIn name the stage,
//     since now (kept, when this promotion already wrote them), its
//     failedIn no longer does, and no other release of the pipeline has
//     the stage in currentlyIn.
//   - Failed because an update failed: the release's failedIn names the
//     stage. A failure to pin (a Stack gone or made unpinnable) is not the
//     release's fault and is recorded on the Promotion only.
//
// reconcilePreview also ends a Pending promotion through it: a failed
// preview (the release failed), a preview-only stage's success.
func (s *session) recordOutcome(ctx context.Context) (sreconcile.Result, error) {
	if s.p.Status.Phase.IsFinished() || s.outcome == "" {
		return sreconcile.ResultEmpty, nil
	}
	name, stageName := s.p.Spec.Release, s.p.Spec.Stage
	release, err := get(ctx, s.r.Client, s.p.Namespace, "Release", name, &promotionv1alpha1.Release{})
	if err != nil {
		return sreconcile.ResultEmpty, err
	}
	entry := promotionv1alpha1.ReleaseInStage{Since: metav1.NewTime(s.now), Promotion: s.p.Name}
	switch {
	case release == nil:
		// Pruned or deleted by hand: the Promotion still records it.
	case s.outcome == promotionv1alpha1.PromotionSucceeded:
		if v, ok := release.Status.VerifiedIn[stageName]; ok && v.Promotion == s.p.Name {
			entry.Since = v.Since
		}
		err = s.patchRelease(ctx, name, map[string]any{
			"currentlyIn": map[string]any{stageName: entry},
			"verifiedIn":  map[string]any{stageName: entry},
			"failedIn":    map[string]any{stageName: nil},
		})
		if err == nil {
			err = s.leaveReplaced(ctx, release)
		}
	case s.releaseFailed:
		entry.Message = sreconcile.Truncate(s.message, maxMessage)
		err = s.patchRelease(ctx, name, map[string]any{"failedIn": map[string]any{stageName: entry}})
	}
	if err != nil {
		return sreconcile.ResultEmpty, sreconcile.NewGeneric(ReasonRecordFailed, err)
	}
	s.end(s.outcome, s.message)
	return sreconcile.ResultSuccess, nil
}

// leaveReplaced takes the stage out of currentlyIn of every release of
// the pipeline but the one just promoted.
func (s *session) leaveReplaced(ctx context.Context, promoted *promotionv1alpha1.Release) error {
	releases, err := change.ListReleases(ctx, s.r.Client, s.p.Namespace, promoted.Spec.Pipeline)
	if err != nil {
		return err
	}
	for _, r := range releases {
		if _, in := r.Status.CurrentlyIn[s.p.Spec.Stage]; !in || r.Name == promoted.Name {
			continue
		}
		if err := s.patchRelease(ctx, r.Name, map[string]any{"currentlyIn": map[string]any{s.p.Spec.Stage: nil}}); err != nil {
			return err
		}
	}
	return nil
}

// patchRelease merges status into the status of the Release name: a JSON
// merge patch, which changes only the stage entries it names (null
// removes one), so promotions of other stages writing the same Release at
// the same time do not undo each other.
func (s *session) patchRelease(ctx context.Context, name string, status map[string]any) error {
	data, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	r := &promotionv1alpha1.Release{}
	r.Namespace, r.Name = s.p.Namespace, name
	if err := s.r.Client.Status().Patch(ctx, r, client.RawPatch(types.MergePatchType, data)); err != nil {
		return fmt.Errorf("recording the promotion on Release %q: %w", name, err)
	}
	return nil
}
