package stage

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/change/policy"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// reconcileReferences checks what the spec names: the Pipeline, each
// upstream Stage (of the same pipeline, without a cycle back to this one),
// the promotion windows, the policy rules' expressions, and each Stack (and, unless the stage only
// previews, that the Stack consents to be deployed by it). Something that
// may still appear is waited for; a conflict only a
// person can settle stalls the stage, and is reported before any wait, so
// that a stage both waiting and wrong says what a person must fix.
func (s *session) reconcileReferences(ctx context.Context) (sreconcile.Result, error) {
	ns, spec := s.stage.Namespace, &s.stage.Spec
	var wait error // the first reference still missing
	var pipeline promotionv1alpha1.Pipeline
	if err := s.r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: spec.Pipeline}, &pipeline); err != nil {
		return sreconcile.ResultEmpty, missingOr(err, "spec.pipeline", "Pipeline", spec.Pipeline)
	}
	// The stages of this pipeline (an index, not every Stage of the
	// namespace): upstream stages must be among them, and so must any
	// cycle back to this one.
	var stages promotionv1alpha1.StageList
	if err := s.r.Client.List(ctx, &stages, client.InNamespace(ns), client.MatchingFields{change.PipelineIndex: spec.Pipeline}); err != nil {
		return sreconcile.ResultEmpty, sreconcile.NewGeneric("", fmt.Errorf("listing stages: %w", err))
	}
	byName := map[string]*promotionv1alpha1.Stage{}
	for i := range stages.Items {
		byName[stages.Items[i].Name] = &stages.Items[i]
	}
	byName[s.stage.Name] = s.stage
	for i, name := range spec.Sources.Stages {
		field := fmt.Sprintf("spec.sources.stages[%d]", i)
		up := byName[name]
		if up == nil {
			// Missing, or of another pipeline: read it to say which.
			var other promotionv1alpha1.Stage
			if err := s.r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &other); err != nil {
				wait = cmp.Or(wait, missingOr(err, field, "Stage", name))
				continue
			}
			up = &other
		}
		if up.Spec.Pipeline != spec.Pipeline {
			return sreconcile.ResultEmpty, sreconcile.NewStalling(sreconcile.StalledSpecInvalidReason, fmt.Errorf(
				"%s: Stage %q belongs to pipeline %q, not %q", field, name, up.Spec.Pipeline, spec.Pipeline))
		}
	}
	if cycle := FindCycle(s.stage.Name, byName); cycle != nil {
		return sreconcile.ResultEmpty, sreconcile.NewStalling(sreconcile.StalledSpecInvalidReason, fmt.Errorf(
			"spec.sources.stages: the stage graph has a cycle: %s", strings.Join(cycle, " → ")))
	}
	windows, err := change.Windows(spec)
	if err != nil {
		return sreconcile.ResultEmpty, sreconcile.NewStalling(sreconcile.StalledSpecInvalidReason, err)
	}
	if err := policy.Check(spec.Policies); err != nil {
		return sreconcile.ResultEmpty, sreconcile.NewStalling(sreconcile.StalledSpecInvalidReason, err)
	}
	// The Stacks spec.stacks names must exist and consent; those the
	// selector matches are members only if they do (reconcileHealth).
	for i, b := range spec.Stacks {
		field := fmt.Sprintf("spec.stacks[%d]", i)
		if s.stacks[b.Name] == nil {
			wait = cmp.Or(wait, missingOr(s.stackErrs[b.Name], field, "Stack", b.Name))
			continue
		}
		if msg := change.Unconsented(s.stage.Name, spec.PreviewOnly, b.Name, s.stacks[b.Name].Annotations); msg != "" {
			return sreconcile.ResultEmpty, sreconcile.NewStalling(sreconcile.StalledSpecInvalidReason, fmt.Errorf("%s: %s", field, msg))
		}
	}
	if wait != nil {
		return sreconcile.ResultEmpty, wait
	}
	s.windows = windows
	return sreconcile.ResultEmpty, nil
}

// missingOr types the failure to read a referenced object: not found is a
// bounded wait naming the field, anything else a failed call.
func missingOr(err error, field, kind, name string) error {
	if err == nil || apierrors.IsNotFound(err) {
		return sreconcile.NewMissing(pulumiv1.ReferenceNotFoundReason, fmt.Errorf("%s: %s %q not found", field, kind, name))
	}
	return sreconcile.NewGeneric("", fmt.Errorf("%s: reading %s %q: %w", field, kind, name, err))
}

// FindCycle returns a cycle of upstream edges through the stage named
// start, as the stage names along it ending where it began (e.g. [qa dev
// qa]), or nil when there is none. Stages missing from stages end a path.
func FindCycle(start string, stages map[string]*promotionv1alpha1.Stage) []string {
	visited := map[string]bool{}
	var walk func(path []string) []string
	walk = func(path []string) []string {
		st := stages[path[len(path)-1]]
		if st == nil {
			return nil
		}
		for _, up := range st.Spec.Sources.Stages {
			if up == start {
				return append(slices.Clone(path), up)
			}
			if visited[up] {
				continue
			}
			visited[up] = true
			if cycle := walk(append(path, up)); cycle != nil {
				return cycle
			}
		}
		return nil
	}
	return walk([]string{start})
}
