package reconcile

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Step is one named phase of a reconcile, e.g. "reconcileSource". Steps
// share one signature so that a controller's Reconcile reads as a short,
// visible chain of them.
type Step struct {
	// Name is the step's verb, used in logs.
	Name string
	// Run does the step's work on the reconciler's object.
	Run func(ctx context.Context) (Result, error)
}

// Steps is an ordered chain of reconcile steps.
type Steps []Step

// Run runs the steps in order and stops at the first that returns an error
// or ResultRequeue, returning what that step returned. When every step
// completes, it returns ResultSuccess if any step reported success and
// ResultEmpty if none did. The step that stopped the chain is logged at
// verbosity 1 with the logger from ctx.
func (s Steps) Run(ctx context.Context) (Result, error) {
	total := ResultEmpty
	for _, step := range s {
		res, err := step.Run(ctx)
		if err != nil || res == ResultRequeue {
			log.FromContext(ctx).V(1).Info("reconcile stopped", "step", step.Name, "result", res.String(), "error", errString(err))
			return res, err
		}
		if res == ResultSuccess {
			total = ResultSuccess
		}
	}
	return total, nil
}

// errString returns err's text, or "" for nil, for structured logs.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
