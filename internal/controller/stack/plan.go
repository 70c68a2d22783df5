package stack

import (
	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// Annotations that hold a Stack's next update to an update plan, so that
// it applies exactly what a preview showed and its approvers approved. The
// Promotion controller sets both together with spec.commit when it pins a
// Stack (in the same server-side apply); a person need never set them.
const (
	// PlanAnnotation names the Secret, in the Stack's namespace, whose key
	// "plan" holds the update plan (see auto.pulumi.com Update
	// spec.planSecret).
	PlanAnnotation = "promotion.stackyard.dev/plan"
	// PlanCommitAnnotation is the commit the plan was made for: the plan
	// holds only ups of that commit.
	PlanCommitAnnotation = "promotion.stackyard.dev/plan-commit"
)

// PlanFor returns the plan Secret an up of the Stack at revision is held
// to: the one PlanAnnotation names, when PlanCommitAnnotation is revision
// and no update of revision has succeeded yet for the Stack's current
// generation (the generation the pin made). Once one has, resyncs and
// later ups of the same generation run without it. "" when there is none.
func PlanFor(stack *pulumiv1.Stack, revision string) string {
	name, commit := stack.Annotations[PlanAnnotation], stack.Annotations[PlanCommitAnnotation]
	if name == "" || commit == "" || commit != revision {
		return ""
	}
	if lu := stack.Status.LastUpdate; lu != nil && lu.State == shared.SucceededStackStateMessage &&
		lu.LastSuccessfulCommit == revision && lu.Generation == stack.Generation {
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
