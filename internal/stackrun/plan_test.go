package stackrun

import (
	"testing"

	"github.com/stackyard/stackyard/internal/change"

	. "github.com/onsi/gomega"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
)

// TestPlanFor holds the ups of the planned commit to the plan until one
// succeeded for the Stack's generation, and nothing else: other commits,
// other types, resyncs after that success.
func TestPlanFor(t *testing.T) {
	g := NewWithT(t)
	s := testStack(nil)
	s.Generation = 4
	base := BuildUpdate(s, UpdateFor{Revision: "c2", Type: autov1alpha1.UpType, Trigger: "GenerationChanged"})
	g.Expect(base.Spec.PlanSecret).To(BeEmpty())

	s.Annotations = map[string]string{change.PlanAnnotation: "p-plan", change.PlanCommitAnnotation: "c2"}
	up := BuildUpdate(s, UpdateFor{Revision: "c2", Type: autov1alpha1.UpType, Trigger: "GenerationChanged"})
	g.Expect(up.Spec.PlanSecret).To(Equal("p-plan"))
	g.Expect(BuildUpdate(s, UpdateFor{Revision: "c1", Type: autov1alpha1.UpType, Trigger: "GenerationChanged"}).Spec.PlanSecret).To(BeEmpty(), "another commit")
	g.Expect(BuildUpdate(s, UpdateFor{Revision: "c2", Type: autov1alpha1.PreviewType, Trigger: "GenerationChanged"}).Spec.PlanSecret).To(BeEmpty(), "a preview")

	// A failed attempt is retried with the plan.
	s.Status.LastUpdate = &shared.StackUpdateState{Name: "web-a1", Generation: 4, State: shared.FailedStackStateMessage,
		LastAttemptedCommit: "c2", LastSuccessfulCommit: "c2", Failures: 1}
	g.Expect(PlanFor(s, "c2")).To(Equal("p-plan"))
	// A success at an earlier generation (before the pin) does not count.
	s.Status.LastUpdate.Generation, s.Status.LastUpdate.State = 3, shared.SucceededStackStateMessage
	g.Expect(PlanFor(s, "c2")).To(Equal("p-plan"))
	// Once an up succeeded for the generation, the plan is spent.
	s.Status.LastUpdate = &shared.StackUpdateState{Name: "web-a1", Generation: 4, State: shared.SucceededStackStateMessage,
		LastAttemptedCommit: "c2", LastSuccessfulCommit: "c2"}
	g.Expect(PlanFor(s, "c2")).To(BeEmpty())
	// The same release promoted again: the generation stays, the
	// promotion's request holds the up to its plan until an up for that
	// request succeeded; a person's request afterwards does not.
	s.Annotations[shared.ReconcileRequestAnnotation] = change.PinRequest("again", "uid-2")
	g.Expect(PlanFor(s, "c2")).To(Equal("p-plan"))
	s.Status.LastUpdate.ReconcileRequest = change.PinRequest("again", "uid-2")
	g.Expect(PlanFor(s, "c2")).To(BeEmpty())
	s.Annotations[shared.ReconcileRequestAnnotation] = "by-hand"
	g.Expect(PlanFor(s, "c2")).To(BeEmpty())
	delete(s.Annotations, shared.ReconcileRequestAnnotation)

	s.Status.LastUpdate = nil
	s.Annotations[change.PlanAnnotation] = "p2-plan"
	g.Expect(BuildUpdate(s, UpdateFor{Revision: "c2", Type: autov1alpha1.UpType, Trigger: "GenerationChanged"}).Spec.PlanSecret).To(Equal("p2-plan"), "a new plan")
}
