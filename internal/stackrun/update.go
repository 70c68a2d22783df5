package stackrun

import (
	"encoding/json"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/shard"
)

// UpdateFor says what an Update of a Stack is for.
type UpdateFor struct {
	// Revision is the source revision it runs.
	Revision string
	// Type is the operation.
	Type autov1alpha1.UpdateType
	// Trigger is why it runs, recorded in TriggerAnnotation.
	Trigger string
	// Remediate says that it undoes drift a check found. So does any
	// Update of a Stack whose drift is to be remediated (DriftPending).
	Remediate bool
}

// BuildUpdate returns the Update that runs for.Type for the Stack at
// for.Revision, with the Stack's updateTemplate merged in, and an up held
// to the Stack's update plan when it has one for that revision (PlanFor).
// It has no name: the API server generates one from the Stack's name when
// it is created, so that no Update can be made in advance under the name
// of a Stack's next one (the Stack records the name it got). A preview
// sets a name of its own.
func BuildUpdate(stack *pulumiv1.Stack, f UpdateFor) *autov1alpha1.Update {
	spec := &stack.Spec
	typ, trigger, revision := f.Type, f.Trigger, f.Revision
	upd := &autov1alpha1.Update{
		TypeMeta: metav1.TypeMeta{APIVersion: autov1alpha1.GroupVersion.String(), Kind: "Update"},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: UpdateNamePrefix(stack),
			Namespace:    stack.Namespace,
			Labels:       map[string]string{StackNameLabel: stack.Name},
			Annotations:  map[string]string{TriggerAnnotation: trigger},
		},
		Spec: autov1alpha1.UpdateSpec{
			WorkspaceName: WorkspaceName(stack),
			StackName:     spec.Stack,
			Type:          typ,
		},
	}
	if typ != autov1alpha1.DestroyType {
		// Undoing drift needs the state refreshed first: without it the
		// state still matches the program and the up changes nothing.
		remediating := f.Remediate || DriftPending(stack)
		upd.Spec.Refresh = ptr.To(spec.Refresh || remediating)
		if typ == autov1alpha1.UpType && spec.Refresh && spec.ExpectNoRefreshChanges && !remediating {
			upd.Spec.ExpectNoRefreshChanges = ptr.To(true)
		}
		if len(spec.Targets) > 0 {
			upd.Spec.Target = spec.Targets
			upd.Spec.TargetDependents = ptr.To(spec.TargetDependents)
		}
	}
	if spec.RunProgram {
		upd.Spec.RunProgram = ptr.To(true)
	}
	applyUpdateTemplate(upd, spec.UpdateTemplate)
	// The Update runs in the Stack's shard, whatever the template says.
	shard.Stamp(stack, upd)
	// Created held, as the Update controller would hold it before running
	// it: one write fewer per Update than adding it on its first reconcile.
	sreconcile.AddFinalizer(upd, autov1alpha1.UpdateFinalizer)
	holdToPlan(upd, stack, revision)
	if upd.Spec.TtlAfterCompleted == nil {
		upd.Spec.TtlAfterCompleted = &metav1.Duration{Duration: DefaultUpdateTTL}
	}
	return upd
}

// DriftPending reports whether remediation is on and drift a check found
// has not been undone yet (DriftDetected is still True): the remediation
// failed and is retried, or another change came first. Every update then
// refreshes, or it would not see the drift it has to undo.
func DriftPending(stack *pulumiv1.Stack) bool {
	dd := stack.Spec.DriftDetection
	return dd != nil && dd.Remediate && apimeta.IsStatusConditionTrue(stack.Status.Conditions, pulumiv1.DriftDetectedCondition)
}

// UpdateNamePrefix is the metadata.generateName of the Stack's Updates:
// its name and a dash, to which the API server adds a random suffix.
func UpdateNamePrefix(stack *pulumiv1.Stack) string {
	return stack.Name + "-"
}

// DefaultUpdateTTL is how long a finished Update (and its outputs Secret)
// is kept when spec.updateTemplate sets no ttlAfterCompleted, upstream's
// default: resyncs and drift checks would otherwise pile them up. The
// Stack's status keeps what matters (lastUpdate, outputs, history).
const DefaultUpdateTTL = 24 * time.Hour

// TriggerAnnotation on an Update records why the Stack controller started
// it, for the history and the audit trail.
const TriggerAnnotation = "stackyard.dev/trigger"

// applyUpdateTemplate copies the template's labels, annotations and the spec
// fields it sets onto upd; the identifying fields (workspace, stack, type)
// stay the Stack's.
func applyUpdateTemplate(upd *autov1alpha1.Update, tmpl *autov1alpha1.UpdateTemplate) {
	if tmpl == nil {
		return
	}
	if m := tmpl.Metadata; m != nil {
		for k, v := range m.Labels {
			if k != StackNameLabel {
				upd.Labels[k] = v
			}
		}
		for k, v := range m.Annotations {
			if k != TriggerAnnotation {
				upd.Annotations[k] = v
			}
		}
	}
	if tmpl.Spec == nil {
		return
	}
	keep := upd.Spec
	base, _ := json.Marshal(upd.Spec)
	overlay, _ := json.Marshal(tmpl.Spec)
	merged := map[string]any{}
	_ = json.Unmarshal(base, &merged)
	extra := map[string]any{}
	_ = json.Unmarshal(overlay, &extra)
	for k, v := range extra {
		merged[k] = v
	}
	out, _ := json.Marshal(merged)
	_ = json.Unmarshal(out, &upd.Spec)
	upd.Spec.WorkspaceName, upd.Spec.StackName, upd.Spec.Type = keep.WorkspaceName, keep.StackName, keep.Type
}

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
	request := stack.Annotations[shared.ReconcileRequestAnnotation]
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
