package change

import (
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

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
	if c := apimeta.FindStatusCondition(conds, pulumiv1.StalledCondition); c != nil && c.Status == metav1.ConditionTrue {
		return degraded(c.Message)
	}
	if c := apimeta.FindStatusCondition(conds, pulumiv1.ReconcilingCondition); c != nil && c.Status == metav1.ConditionTrue {
		return progressing(c.Message)
	}
	if stack.Status.ObservedGeneration != stack.Generation || !apimeta.IsStatusConditionTrue(conds, pulumiv1.ReadyCondition) {
		return progressing(fmt.Sprintf("waiting for the operator to handle generation %d", stack.Generation))
	}
	return promotionv1alpha1.StageHealth{Status: promotionv1alpha1.Healthy}
}
