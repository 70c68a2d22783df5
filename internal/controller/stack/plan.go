package stack

import (
	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
)

// PlanFor returns the plan Secret an up of the Stack at revision is held
// to: the one change.PlanAnnotation names, when change.PlanCommitAnnotation
// is revision and no update of revision has succeeded yet for the pin: for
// the Stack's current generation (the generation the pin made) and, when
// the Stack's reconcile request is a promotion's (change.IsPinRequest),
// for that request (a promotion of the release the Stack runs already
// changes no generation). Once one has, resyncs and later ups run
// without it. "" when there is none.
func PlanFor(stack *pulumiv1.Stack, revision string) string {
	name, commit := stack.Annotations[change.PlanAnnotation], stack.Annotations[change.PlanCommitAnnotation]
	if name == "" || commit == "" || commit != revision {
		return ""
	}
	request := reconcileRequest(stack)
	if lu := stack.Status.LastUpdate; lu != nil && lu.State == shared.SucceededStackStateMessage &&
		lu.LastSuccessfulCommit == revision && lu.Generation == stack.Generation &&
		(!change.IsPinRequest(request) || lu.ReconcileRequest == request) {
		return ""
	}
	return name
}

// holdToPlan makes upd, an update of the Stack at revision, follow the
// Stack's plan, if PlanFor finds one; other types are left alone.
func holdToPlan(upd *autov1alpha1.Update, stack *pulumiv1.Stack, revision string) {
	if upd.Spec.Type != autov1alpha1.UpType {
		return
	}
	upd.Spec.PlanSecret = PlanFor(stack, revision)
}
