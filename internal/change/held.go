package change

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// Held changes. Whoever may update a Stack may change its spec, a
// governed Stack's too (config/policy keeps its commit, its source and
// its stage to governors and promotions). The operator deploys a governed
// Stack's spec only once it is approved, as recorded in the Stack's
// status.approvedSpec, which only the operator writes; a spec that
// differs is held: the Stack keeps what it deployed and runs nothing with
// it. ApproveSpec decides, from records only, and the choke point asks
// SpecApproved before every operation of a governed Stack.

// SpecDecision is what ApproveSpec decided of a Stack's current spec.
type SpecDecision struct {
	// Digest is the SpecDigest of the current spec.
	Digest string
	// Approval is the record to keep when the spec is approved: the one
	// kept already, or a new one. Nil when the spec is held.
	Approval *shared.SpecApproval
	// Held describes the change when the spec is held (its Since unset);
	// nil when it is approved.
	Held *shared.HeldSpec
	// Message says, naming the field, why the spec is held.
	Message string
}

// ApproveSpec decides whether stack's current spec (apart from the
// commit) may be deployed. It is approved when:
//   - no stage governs the Stack;
//   - status.approvedSpec already records its digest;
//   - it is the spec the Stack was created with, or bound to its stage
//     with (generation 1: either write needed "govern" on the stage);
//   - the Stack has no approval on record yet and has deployed this
//     generation already (an upgrade from a version that kept none);
//   - the promotion that pinned the Stack (its reconcile request, which
//     only a governor or the operator writes, names it by name and UID),
//     of the Stack's stage, previewed exactly what the Stack reads now
//     (StackDigest: its spec, and the Secrets and ConfigMaps it names).
//
// Otherwise it is held. Promotions are read through r, live.
func ApproveSpec(ctx context.Context, r client.Reader, stack *pulumiv1.Stack) (SpecDecision, error) {
	digest, err := SpecDigest(stack)
	if err != nil {
		return SpecDecision{}, err
	}
	d := SpecDecision{Digest: digest}
	rec := stack.Status.ApprovedSpec
	stage := AuthorizedStage(stack.Annotations)
	// A governed Stack's approved spec is kept, for a held change to be
	// shown against; it is made only when a decision records or compares
	// it, not on every reconcile of an approved spec.
	snapshot := func() (*apiextensionsv1.JSON, error) {
		if stage == "" {
			return nil, nil
		}
		return SpecSnapshot(&stack.Spec)
	}
	approve := func(by, promotion string) (SpecDecision, error) {
		snap, err := snapshot()
		if err != nil {
			return SpecDecision{}, err
		}
		d.Approval = &shared.SpecApproval{Digest: digest, Generation: stack.Generation, By: by, Promotion: promotion, Snapshot: snap}
		return d, nil
	}
	switch lu := stack.Status.LastUpdate; {
	case stage == "":
		return approve(shared.ApprovedUngoverned, "")
	case rec != nil && rec.Digest == digest:
		d.Approval = rec
		if rec.Snapshot == nil {
			// Approved before snapshots were kept, or while ungoverned.
			d.Approval = rec.DeepCopy()
			if d.Approval.Snapshot, err = snapshot(); err != nil {
				return SpecDecision{}, err
			}
		}
		return d, nil
	case stack.Generation == 1:
		return approve(shared.ApprovedCreated, "")
	case rec == nil && lu != nil && lu.Generation == stack.Generation:
		return approve(shared.ApprovedDeployed, "")
	}
	name, p, err := pinnedBy(ctx, r, stack)
	if err != nil {
		return SpecDecision{}, err
	}
	if p != nil && p.Spec.Stage == stage {
		pv, err := PreviewOf(ctx, r, p, stack.Name)
		if err != nil {
			return SpecDecision{}, err
		}
		if pv != nil && pv.Inputs != "" {
			now, err := StackDigest(ctx, r, stack)
			if err != nil {
				return SpecDecision{}, err
			}
			if now == pv.Inputs {
				return approve(shared.ApprovedPromotion, name)
			}
		}
	}
	d.Held = &shared.HeldSpec{Digest: digest, Generation: stack.Generation}
	if rec != nil && rec.Snapshot != nil {
		snap, err := snapshot()
		if err != nil {
			return SpecDecision{}, err
		}
		if d.Held.Changes, d.Held.ChangesTruncated, err = DiffSpecs(rec.Snapshot, snap); err != nil {
			return SpecDecision{}, err
		}
	}
	if ed, ok, err := EditorOf(stack); err == nil && ok {
		d.Held.EditedBy = ed.Username
	}
	d.Message = fmt.Sprintf("spec: Stack %s is governed by stage %s, and its spec (generation %d, digest %s) is not the one approved for it%s: "+
		"the change waits for a promotion of stage %s to preview and approve it, and the Stack keeps what it deployed meanwhile; "+
		"reverting the spec withdraws it", stack.Name, stage, stack.Generation, shortDigest(digest), approvedOf(rec), stage)
	return d, nil
}

// approvedOf names the approved spec for a message.
func approvedOf(rec *shared.SpecApproval) string {
	if rec == nil {
		return " (none is on record)"
	}
	return fmt.Sprintf(" (generation %d, digest %s)", rec.Generation, shortDigest(rec.Digest))
}

// shortDigest is a digest's first 12 hex digits, for messages.
func shortDigest(d string) string {
	const prefix = "sha256:"
	if len(d) > len(prefix)+12 {
		return d[len(prefix) : len(prefix)+12]
	}
	return d
}

// SpecApproved reports whether stack's current spec is the one its
// status.approvedSpec records, or no stage governs it; otherwise msg says
// why nothing may run for it. The choke point asks it of every operation
// of a governed Stack: an operation runs with the spec's inputs.
func SpecApproved(stack *pulumiv1.Stack) (ok bool, msg string, err error) {
	stage := AuthorizedStage(stack.Annotations)
	if stage == "" {
		return true, "", nil
	}
	digest, err := SpecDigest(stack)
	if err != nil {
		return false, "", err
	}
	if rec := stack.Status.ApprovedSpec; rec != nil && rec.Digest == digest {
		return true, "", nil
	}
	return false, fmt.Sprintf("status.approvedSpec: the spec of Stack %s (governed by stage %s; generation %d, digest %s) is not the one approved for it%s: "+
		"a held change runs nothing until a promotion of stage %s approves it", stack.Name, stage, stack.Generation, shortDigest(digest),
		approvedOf(stack.Status.ApprovedSpec), stage), nil
}
