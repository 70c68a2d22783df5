// Package reconcile is the machinery every stackyard controller shares, so
// that each Reconcile reads as a short, visible chain of steps and the
// decisions about what happens next are made in one place:
//
//   - errors.go: errors typed by what happens next (Stalling, Waiting,
//     Generic, Ignore);
//   - result.go: the step result enum and ComputeResult, the one mapping from
//     a reconcile's outcome to controller-runtime's (ctrl.Result, error);
//   - steps.go: Steps, the ordered runner of a controller's named steps;
//   - conditions.go and summarize.go: the kstatus Ready/Reconciling/Stalled
//     protocol with the Pulumi Kubernetes Operator v2 reasons and messages;
//   - backoff.go: the failure cooldown, jitter and interval helpers;
//   - patch.go and finalizer.go: snapshot the object once, patch its
//     metadata and status once at the end.
//
// The package knows no stackyard API type: it works on client.Object and
// []metav1.Condition, so every kind can use it.
//
// Its name is the same as controller-runtime's pkg/reconcile; import it under
// an alias where both are needed, e.g.
//
//	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
package reconcile
