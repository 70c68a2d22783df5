package stage

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// reconcileHealth reads the bound Stacks and sums up their kstatus
// conditions in status.health.
func (s *session) reconcileHealth(ctx context.Context) (sreconcile.Result, error) {
	s.stacks, s.stackErrs = map[string]*pulumiv1.Stack{}, map[string]error{}
	for _, b := range s.stage.Spec.Stacks {
		var stack pulumiv1.Stack
		err := s.r.Client.Get(ctx, client.ObjectKey{Namespace: s.stage.Namespace, Name: b.Name}, &stack)
		switch {
		case err == nil:
			s.stacks[b.Name] = &stack
		case apierrors.IsNotFound(err):
			s.stackErrs[b.Name] = err
		default:
			return sreconcile.ResultEmpty, sreconcile.NewGeneric("", fmt.Errorf("reading Stack %q: %w", b.Name, err))
		}
	}
	h := Health(s.stage.Spec.Stacks, s.stacks)
	s.stage.Status.Health = &h
	return sreconcile.ResultEmpty, nil
}

// Health sums up the Stacks bound (found in stacks by name; a missing one
// is absent) by their kstatus conditions: Degraded when one is missing or
// Stalled, else Progressing when one has not finished with its generation
// or is Reconciling, else Healthy. The message names the first Stack that
// makes it so.
func Health(bindings []promotionv1alpha1.StackBinding, stacks map[string]*pulumiv1.Stack) promotionv1alpha1.StageHealth {
	worst := promotionv1alpha1.StageHealth{Status: promotionv1alpha1.Healthy}
	rank := map[promotionv1alpha1.StageHealthStatus]int{promotionv1alpha1.Healthy: 0, promotionv1alpha1.Progressing: 1, promotionv1alpha1.Degraded: 2}
	for _, b := range bindings {
		h := stackHealth(b.Name, stacks[b.Name])
		if rank[h.Status] > rank[worst.Status] {
			worst = h
		}
	}
	return worst
}

// stackHealth is the health of one Stack.
func stackHealth(name string, stack *pulumiv1.Stack) promotionv1alpha1.StageHealth {
	degraded := func(msg string) promotionv1alpha1.StageHealth {
		return promotionv1alpha1.StageHealth{Status: promotionv1alpha1.Degraded, Message: fmt.Sprintf("Stack %s: %s", name, msg)}
	}
	progressing := func(msg string) promotionv1alpha1.StageHealth {
		return promotionv1alpha1.StageHealth{Status: promotionv1alpha1.Progressing, Message: fmt.Sprintf("Stack %s: %s", name, msg)}
	}
	if stack == nil {
		return degraded("not found")
	}
	conds := stack.Status.Conditions
	if c := apimeta.FindStatusCondition(conds, sreconcile.StalledCondition); c != nil && c.Status == metav1.ConditionTrue {
		return degraded(c.Message)
	}
	if c := apimeta.FindStatusCondition(conds, sreconcile.ReconcilingCondition); c != nil && c.Status == metav1.ConditionTrue {
		return progressing(c.Message)
	}
	if stack.Status.ObservedGeneration != stack.Generation || !sreconcile.IsReady(conds) {
		return progressing(fmt.Sprintf("waiting for the operator to handle generation %d", stack.Generation))
	}
	return promotionv1alpha1.StageHealth{Status: promotionv1alpha1.Healthy}
}
