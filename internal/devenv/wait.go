package devenv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// samplePollInterval is how often WaitForSample looks again.
const samplePollInterval = time.Second

// WaitForSample returns once the sample Stack is Ready and a promotion into
// SampleDev has succeeded: what a developer sees as "make dev works". When
// ctx ends first, the error says what was still missing.
func WaitForSample(ctx context.Context, c client.Client) error {
	tick := time.NewTicker(samplePollInterval)
	defer tick.Stop()
	for {
		// Read past ctx's end, so that the error says what was missing
		// rather than that the deadline passed.
		readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		missing := sampleMissing(readCtx, c)
		cancel()
		if missing == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New(missing)
		case <-tick.C:
		}
	}
}

// sampleMissing describes what the sample still lacks, or "" when nothing.
func sampleMissing(ctx context.Context, c client.Client) string {
	var stack pulumiv1.Stack
	key := client.ObjectKey{Namespace: "default", Name: SampleName}
	if err := c.Get(ctx, key, &stack); err != nil {
		return fmt.Sprintf("reading Stack %s: %v", SampleName, err)
	}
	if !meta.IsStatusConditionTrue(stack.Status.Conditions, "Ready") {
		return fmt.Sprintf("Stack %s is not Ready: %s", SampleName, conditionText(stack.Status.Conditions))
	}
	var promotions promotionv1alpha1.PromotionList
	if err := c.List(ctx, &promotions, client.InNamespace("default")); err != nil {
		return fmt.Sprintf("listing promotions: %v", err)
	}
	latest := "none was made"
	for _, p := range promotions.Items {
		if p.Spec.Stage != SampleDev {
			continue
		}
		if p.Status.Phase == promotionv1alpha1.PromotionSucceeded {
			return ""
		}
		latest = fmt.Sprintf("%s is %s", p.Name, phaseText(p.Status.Phase))
	}
	return fmt.Sprintf("no promotion into Stage %s has succeeded (%s)", SampleDev, latest)
}

// conditionText is the Ready condition's reason and message, or a note that
// there is none yet.
func conditionText(conds []metav1.Condition) string {
	ready := meta.FindStatusCondition(conds, "Ready")
	if ready == nil {
		return "no Ready condition yet"
	}
	return fmt.Sprintf("%s: %s", ready.Reason, ready.Message)
}

func phaseText(p promotionv1alpha1.PromotionPhase) string {
	if p == "" {
		return "not started"
	}
	return string(p)
}
