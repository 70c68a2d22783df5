package stack

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// PrerequisiteIndex indexes Stacks by the names of their prerequisites, so a
// Stack that turns Ready wakes the Stacks waiting for it.
const PrerequisiteIndex = "spec.prerequisites.name"

// indexPrerequisites is the PrerequisiteIndex function.
func indexPrerequisites(obj client.Object) []string {
	stack, ok := obj.(*pulumiv1.Stack)
	if !ok {
		return nil
	}
	names := make([]string, 0, len(stack.Spec.Prerequisites))
	for _, p := range stack.Spec.Prerequisites {
		names = append(names, p.Name)
	}
	return names
}

// checkPrerequisites returns a Waiting error naming the first prerequisite
// that is not satisfied: missing, not Ready, or (with succeededWithinDuration)
// not successful recently enough. A stale prerequisite is asked to run again
// by setting its reconciliation-request annotation, once: while a request is
// pending it is not asked again, so reconciles stay idempotent.
func (s *session) checkPrerequisites(ctx context.Context) error {
	if err := s.checkCycle(ctx); err != nil {
		return err
	}
	for i, p := range s.stack.Spec.Prerequisites {
		field := fmt.Sprintf("spec.prerequisites[%d]", i)
		var pre pulumiv1.Stack
		if err := s.r.Client.Get(ctx, client.ObjectKey{Namespace: s.stack.Namespace, Name: p.Name}, &pre); err != nil {
			if apierrors.IsNotFound(err) {
				return s.prerequisiteMissing(ctx, field, p.Name)
			}
			return failed(pulumiv1.PrerequisiteReadFailedReason, fmt.Sprintf("%s: reading Stack %q", field, p.Name), err)
		}
		last := pre.Status.LastUpdate
		if !sreconcile.IsReady(pre.Status.Conditions) || last == nil || last.State != shared.SucceededStackStateMessage {
			return notSatisfied("%s: Stack %q has not succeeded yet", field, p.Name)
		}
		if p.Requirement == nil || p.Requirement.SucceededWithinDuration == nil {
			continue
		}
		within := p.Requirement.SucceededWithinDuration.Duration
		if age := s.now.Sub(last.LastResyncTime.Time); age > within {
			if err := s.requestResync(ctx, &pre); err != nil {
				return err
			}
			return notSatisfied("%s: Stack %q last succeeded %s ago, more than %s; asked it to run again",
				field, p.Name, age.Round(1e9), within)
		}
	}
	return nil
}

// requestResync sets the prerequisite's reconciliation-request annotation,
// unless a request it has not handled yet is already there.
func (s *session) requestResync(ctx context.Context, pre *pulumiv1.Stack) error {
	pending := pre.Annotations[shared.ReconcileRequestAnnotation]
	if pending != "" && pending != pre.Status.ObservedReconcileRequest {
		return nil
	}
	base := pre.DeepCopy()
	if pre.Annotations == nil {
		pre.Annotations = map[string]string{}
	}
	pre.Annotations[shared.ReconcileRequestAnnotation] = fmt.Sprintf("prerequisite-of-%s-%d", s.stack.Name, s.now.Unix())
	if err := s.r.Client.Patch(ctx, pre, client.MergeFrom(base)); err != nil {
		return failed(pulumiv1.PrerequisiteReadFailedReason, fmt.Sprintf("asking prerequisite Stack %q to run again", pre.Name), err)
	}
	return nil
}

// checkCycle stalls a Stack whose prerequisites lead back to itself: it
// would wait for itself forever. The API server refuses a Stack that lists
// itself; a longer cycle spans several objects, which admission cannot
// see, so it is found here, walking the prerequisites through the cache.
// The message names the field and the cycle.
func (s *session) checkCycle(ctx context.Context) error {
	ns := s.stack.Namespace
	for i, p := range s.stack.Spec.Prerequisites {
		path := []string{s.stack.Name, p.Name}
		seen := map[string]bool{p.Name: true}
		next := []([]string){path}
		for len(next) > 0 {
			cur := next[0]
			next = next[1:]
			name := cur[len(cur)-1]
			if name == s.stack.Name {
				return sreconcile.NewStalling(pulumiv1.StalledSpecInvalidReason,
					fmt.Errorf("spec.prerequisites[%d]: the prerequisites form a cycle, so the Stack would wait for itself: %s", i, strings.Join(cur, " → ")))
			}
			var pre pulumiv1.Stack
			if err := s.r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pre); err != nil {
				continue // a missing prerequisite is reported by the wait for it
			}
			for _, q := range pre.Spec.Prerequisites {
				if !seen[q.Name] || q.Name == s.stack.Name {
					seen[q.Name] = true
					next = append(next, append(append([]string(nil), cur...), q.Name))
				}
			}
		}
	}
	return nil
}

func notSatisfied(format string, args ...any) error {
	return sreconcile.NewWaiting(pulumiv1.ReconcilingPrerequisiteNotSatisfiedReason, fmt.Errorf(format, args...), waitInterval)
}

// prerequisiteMissing is the error for a prerequisite this shard's cache
// does not hold: a wait while it does not exist, and a stall, naming the
// field, when it exists in another shard, whose Stacks a named shard
// neither sees nor is woken by.
func (s *session) prerequisiteMissing(ctx context.Context, field, name string) error {
	if !s.r.Shard.IsDefault() {
		var pre pulumiv1.Stack
		err := s.r.apiReader().Get(ctx, client.ObjectKey{Namespace: s.stack.Namespace, Name: name}, &pre)
		switch {
		case err == nil && !s.r.Shard.Owns(&pre):
			return sreconcile.NewStallingRequeue(pulumiv1.StalledSpecInvalidReason, s.r.Shard.Elsewhere(field, "Stack", &pre), time.Minute)
		case err != nil && !apierrors.IsNotFound(err):
			// Not knowing is not "not found": say what failed, and retry.
			return failed(pulumiv1.ReconcilingPrerequisiteNotSatisfiedReason, fmt.Sprintf("%s: reading Stack %q", field, name), err)
		}
	}
	return notSatisfied("%s: Stack %q not found", field, name)
}
