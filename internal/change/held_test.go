package change

import (
	"context"
	"strings"
	"testing"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// TestApproveSpec: a governed Stack's spec is deployed only when a record
// approves it; anything else is held.
func TestApproveSpec(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		// edit changes the world's prod Stack (generation 3, its spec
		// approved at generation 2, pinned by promotion "promote", which
		// previewed what it reads now).
		edit     func(w *world, s *pulumiv1.Stack)
		by       string // the approval's By; "" for held
		promoted string
		editedBy string
	}{
		{name: "the spec on record", by: shared.ApprovedCreated},
		{name: "what the pinning promotion previewed",
			edit: func(_ *world, s *pulumiv1.Stack) { s.Status.ApprovedSpec.Digest = "sha256:other" },
			by:   shared.ApprovedPromotion, promoted: "promote"},
		{name: "a change the pinning promotion did not preview",
			edit: func(_ *world, s *pulumiv1.Stack) { s.Spec.Refresh = true }},
		{name: "a change, stamped by its editor",
			edit: func(_ *world, s *pulumiv1.Stack) {
				s.Spec.Refresh = true
				must(StampEdit(s, "alice"))
			},
			editedBy: "alice"},
		{name: "a change, with a stamp of another spec",
			edit: func(_ *world, s *pulumiv1.Stack) {
				must(StampEdit(s, "alice"))
				s.Spec.Refresh = true
			}},
		{name: "what a promotion of another stage previewed",
			edit: func(w *world, s *pulumiv1.Stack) {
				s.Status.ApprovedSpec.Digest = "sha256:other"
				w.promote.Spec.Stage = "elsewhere"
			}},
		{name: "pinned by no promotion",
			edit: func(_ *world, s *pulumiv1.Stack) {
				s.Status.ApprovedSpec.Digest = "sha256:other"
				s.Annotations[shared.ReconcileRequestAnnotation] = "by hand"
			}},
		{name: "pinned by a promotion of the name with another UID",
			edit: func(_ *world, s *pulumiv1.Stack) {
				s.Status.ApprovedSpec.Digest = "sha256:other"
				s.Annotations[shared.ReconcileRequestAnnotation] = PinRequest("promote", "uid-other")
			}},
		{name: "the spec it was created or bound with",
			edit: func(_ *world, s *pulumiv1.Stack) {
				s.Generation, s.Status.ApprovedSpec = 1, nil
				s.Spec.Refresh = true
			},
			by: shared.ApprovedCreated},
		{name: "no record, the generation deployed already (an upgrade)",
			edit: func(_ *world, s *pulumiv1.Stack) {
				s.Spec.Refresh = true
				s.Status.ApprovedSpec = nil
				s.Status.LastUpdate = &shared.StackUpdateState{State: shared.SucceededStackStateMessage, Generation: 3}
			},
			by: shared.ApprovedDeployed},
		{name: "no record, a generation not deployed yet",
			edit: func(_ *world, s *pulumiv1.Stack) {
				s.Spec.Refresh = true
				s.Status.ApprovedSpec = nil
				s.Status.LastUpdate = &shared.StackUpdateState{State: shared.SucceededStackStateMessage, Generation: 2}
			}},
		{name: "a record of another spec, the generation deployed (only the record counts)",
			edit: func(_ *world, s *pulumiv1.Stack) {
				s.Spec.Refresh = true
				s.Status.LastUpdate = &shared.StackUpdateState{State: shared.SucceededStackStateMessage, Generation: 3}
			}},
		{name: "an ungoverned Stack's any spec",
			edit: func(_ *world, s *pulumiv1.Stack) {
				s.Spec.Refresh = true
				delete(s.Annotations, promotionv1alpha1.AuthorizedStageAnnotation)
			},
			by: shared.ApprovedUngoverned},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w, c := newWorld(t)
			stack := w.prod.DeepCopy()
			stack.Generation = 3
			if tt.edit != nil {
				tt.edit(w, stack)
				must(c.Update(ctx, w.promote))
			}
			d, err := ApproveSpec(ctx, c, stack)
			if err != nil {
				t.Fatal(err)
			}
			digest, _ := SpecDigest(stack)
			if d.Digest != digest {
				t.Errorf("Digest = %s, want %s", d.Digest, digest)
			}
			if tt.by == "" {
				if d.Approval != nil || d.Held == nil {
					t.Fatalf("ApproveSpec = %+v; want the change held", d)
				}
				if d.Held.Digest != digest || d.Held.Generation != stack.Generation || d.Held.EditedBy != tt.editedBy {
					t.Errorf("Held = %+v; want digest %s, generation %d, editedBy %q", d.Held, digest, stack.Generation, tt.editedBy)
				}
				if !strings.Contains(d.Message, "spec: Stack prod is governed by stage prod") {
					t.Errorf("Message = %q; want it to name the field and the stage", d.Message)
				}
				if ok, _, _ := SpecApproved(stack); ok && stack.Status.ApprovedSpec != nil {
					t.Error("SpecApproved allows a held change")
				}
				return
			}
			if d.Held != nil || d.Approval == nil || d.Approval.By != tt.by || d.Approval.Promotion != tt.promoted || d.Approval.Digest != digest {
				t.Fatalf("ApproveSpec = %+v (approval %+v); want approved by %s %s", d, d.Approval, tt.by, tt.promoted)
			}
			stack.Status.ApprovedSpec = d.Approval
			if ok, msg, _ := SpecApproved(stack); !ok {
				t.Errorf("SpecApproved refuses the approved spec: %s", msg)
			}
		})
	}
}
