package stage

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/schedule"
)

// reconcileReferences checks what the spec names: the Pipeline, each
// upstream Stage (of the same pipeline, without a cycle back to this one),
// the promotion windows, and each Stack (and that no older stage binds
// it). Something that may still appear is waited for; a conflict only a
// person can settle stalls the stage, and is reported before any wait, so
// that a stage both waiting and wrong says what a person must fix.
func (s *session) reconcileReferences(ctx context.Context) (sreconcile.Result, error) {
	ns, spec := s.stage.Namespace, &s.stage.Spec
	var wait error // the first reference still missing
	var pipeline promotionv1alpha1.Pipeline
	if err := s.r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: spec.Pipeline}, &pipeline); err != nil {
		return sreconcile.ResultEmpty, missingOr(err, "spec.pipeline", "Pipeline", spec.Pipeline)
	}
	var stages promotionv1alpha1.StageList
	if err := s.r.Client.List(ctx, &stages, client.InNamespace(ns)); err != nil {
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
			wait = cmp.Or(wait, missingOr(nil, field, "Stage", name))
			continue
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
	windows, err := Windows(spec)
	if err != nil {
		return sreconcile.ResultEmpty, sreconcile.NewStalling(sreconcile.StalledSpecInvalidReason, err)
	}
	for i, b := range spec.Stacks {
		field := fmt.Sprintf("spec.stacks[%d]", i)
		if s.stacks[b.Name] == nil {
			wait = cmp.Or(wait, missingOr(s.stackErrs[b.Name], field, "Stack", b.Name))
			continue
		}
		var binders promotionv1alpha1.StageList
		if err := s.r.Client.List(ctx, &binders, client.InNamespace(ns), client.MatchingFields{StackIndex: b.Name}); err != nil {
			return sreconcile.ResultEmpty, sreconcile.NewGeneric("", fmt.Errorf("%s: listing the stages bound to Stack %q: %w", field, b.Name, err))
		}
		if owner := OwnerOf(binders.Items, b.Name); owner != nil && owner.Name != s.stage.Name && !spec.PreviewOnly {
			return sreconcile.ResultEmpty, sreconcile.NewStalling(sreconcile.StalledSpecInvalidReason, fmt.Errorf(
				"%s: Stack %q is bound to Stage %q, which is older; a Stack belongs to one stage: remove it from one of them", field, b.Name, owner.Name))
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

// CompareAge orders objects from the oldest to the newest: by
// creationTimestamp, then by name. The older of two stages keeps a Stack
// both bind; the newest Pending promotion of a stage runs next.
func CompareAge(a, b metav1.Object) int {
	if c := a.GetCreationTimestamp().Compare(b.GetCreationTimestamp().Time); c != 0 {
		return c
	}
	return strings.Compare(a.GetName(), b.GetName())
}

// OwnerOf returns, of stages, the oldest one that binds the Stack named
// stack and is not being deleted: the one that deploys it. Nil when none
// binds it. Preview-only stages own no Stack: they bind the Stacks of
// another stage to preview them, and never change them.
func OwnerOf(stages []promotionv1alpha1.Stage, stack string) *promotionv1alpha1.Stage {
	var owner *promotionv1alpha1.Stage
	for i := range stages {
		st := &stages[i]
		binds := slices.ContainsFunc(st.Spec.Stacks, func(b promotionv1alpha1.StackBinding) bool { return b.Name == stack })
		if !binds || !st.DeletionTimestamp.IsZero() || st.Spec.PreviewOnly {
			continue
		}
		if owner == nil || CompareAge(st, owner) < 0 {
			owner = st
		}
	}
	return owner
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

// Windows reads spec.promotionWindows; an error names the window's field.
func Windows(spec *promotionv1alpha1.StageSpec) ([]schedule.Window, error) {
	windows := make([]schedule.Window, 0, len(spec.PromotionWindows))
	for i, pw := range spec.PromotionWindows {
		rule, err := schedule.ParseRule(pw.RRule)
		if err != nil {
			return nil, fmt.Errorf("spec.promotionWindows[%d].rrule: %w", i, err)
		}
		kind := schedule.Allow
		if pw.Kind == promotionv1alpha1.Deny {
			kind = schedule.Deny
		}
		w, err := schedule.NewWindow(kind, rule, pw.DTStart.Time, pw.DTEnd.Time)
		if err != nil {
			return nil, fmt.Errorf("spec.promotionWindows[%d]: %w", i, err)
		}
		windows = append(windows, w)
	}
	return windows, nil
}
