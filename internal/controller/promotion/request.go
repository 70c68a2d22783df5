package promotion

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// reconcileRequest reads the Stage and the Release the promotion names and
// refuses, while it is Pending, what cannot be promoted: a stage or
// release that does not exist, a release of another pipeline, a rollback
// to a release never verified in the stage, a frozen stage. It labels the
// promotion with its stage and pipeline, for `kubectl get -l`. While the
// promotion runs it only reads the stage, for events.
func (s *session) reconcileRequest(ctx context.Context) (sreconcile.Result, error) {
	if s.p.Status.Phase.IsFinished() {
		return sreconcile.ResultEmpty, nil
	}
	ns, spec := s.p.Namespace, &s.p.Spec
	stage, err := find(ctx, s, "Stage", spec.Stage, &promotionv1alpha1.Stage{})
	if err != nil {
		return sreconcile.ResultEmpty, err
	}
	s.stage = stage
	if !s.pending() {
		return sreconcile.ResultEmpty, nil
	}
	if stage == nil {
		return s.abort("spec.stage: Stage %q not found in namespace %s", spec.Stage, ns)
	}
	s.label(stage)
	release, err := find(ctx, s, "Release", spec.Release, &promotionv1alpha1.Release{})
	if err != nil {
		return sreconcile.ResultEmpty, err
	}
	s.release = release
	switch {
	case !stage.DeletionTimestamp.IsZero():
		return s.abort("spec.stage: Stage %q is being deleted", spec.Stage)
	case release == nil:
		return s.abort("spec.release: Release %q not found in namespace %s", spec.Release, ns)
	case release.Spec.Pipeline != stage.Spec.Pipeline:
		return s.abort("spec.release: Release %q belongs to pipeline %q, not to %q, the pipeline of stage %q",
			spec.Release, release.Spec.Pipeline, stage.Spec.Pipeline, spec.Stage)
	case spec.Rollback && !verifiedIn(release, spec.Stage):
		return s.abort("spec.release: Release %q was never verified in stage %q; a rollback goes back to a release that was",
			spec.Release, spec.Stage)
	case stage.Spec.Freeze != nil:
		return s.abort("spec.stage: Stage %q is frozen: %s", spec.Stage, stage.Spec.Freeze.Reason)
	}
	if _, err := change.StackSelector(stage); err != nil {
		return s.abort("spec.stage: Stage %q: %v", spec.Stage, err)
	}
	members, err := change.ListMembers(ctx, s.r.Client, stage)
	if err != nil {
		return sreconcile.ResultEmpty, sreconcile.NewGeneric("", err)
	}
	if n := len(members.Bindings); n > change.MaxMembers {
		return s.abort("spec.stage: Stage %q deploys %d Stacks, more than the %d a promotion records", spec.Stage, n, change.MaxMembers)
	}
	if problem := members.Problem(spec.Stage); problem != "" {
		return s.abort("spec.stage: %s", problem)
	}
	s.members = members
	return sreconcile.ResultEmpty, nil
}

// object is an API object held by pointer, which can be compared with nil.
type object interface {
	comparable
	client.Object
}

// get reads the kind named name in namespace into obj, or returns nil when
// it does not exist.
func get[T object](ctx context.Context, c client.Reader, namespace, kind, name string, obj T) (T, error) {
	var zero T
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return zero, nil
	case err != nil:
		return zero, sreconcile.NewGeneric("", fmt.Errorf("reading %s %q: %w", kind, name, err))
	}
	return obj, nil
}

// find reads the kind named name in the promotion's namespace into obj,
// or returns nil when it does not exist. What the cache does not hold yet
// (an object created a moment before the promotion) is looked up on the
// API server before it is called missing: a refusal is final.
func find[T object](ctx context.Context, s *session, kind, name string, obj T) (T, error) {
	var none T
	found, err := get(ctx, s.r.Client, s.p.Namespace, kind, name, obj)
	if err != nil || found != none {
		return found, err
	}
	return get(ctx, s.r.APIReader, s.p.Namespace, kind, name, obj)
}

// label sets the stage and pipeline labels a promotion created without
// them lacks.
func (s *session) label(stage *promotionv1alpha1.Stage) {
	labels := s.p.GetLabels()
	if labels[promotionv1alpha1.StageLabel] == stage.Name && labels[promotionv1alpha1.PipelineLabel] == stage.Spec.Pipeline {
		return
	}
	if labels == nil {
		labels = map[string]string{}
	}
	labels[promotionv1alpha1.StageLabel], labels[promotionv1alpha1.PipelineLabel] = stage.Name, stage.Spec.Pipeline
	s.p.SetLabels(labels)
}

// verifiedIn reports whether release was verified in stage.
func verifiedIn(release *promotionv1alpha1.Release, stage string) bool {
	_, ok := release.Status.VerifiedIn[stage]
	return ok
}
