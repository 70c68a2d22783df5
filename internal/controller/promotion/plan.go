package promotion

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// Plans: each preview saves its update plan (the preview Update's
// spec.savePlan); the promotion copies it into a Secret of its own, named
// in the record's preview.plan, whose digest is an input of the plan digest
// the approvals are bound to; and pinStacks pins each Stack with the
// annotations that hold its next up to that plan (change.PlanAnnotation,
// change.PlanCommitAnnotation). An up that would do anything the plan does
// not allow fails with "violates plan", before changing the resource
// concerned, and the promotion fails asking for a new one.
//
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create

// copyPlan copies the plan the successful preview Update upd saved, and
// its value diff, with the patch of the code the promotion brings (key
// promotionv1alpha1.SourcePatchKey), into a Secret owned by the promotion, which outlives the Update (its
// ttlAfterCompleted deletes it, and its plan Secret with it), and returns
// the copy's name and change.PlanDigest of what it holds. A preview that
// saved no plan is a failure of the preview, returned as failure.
func (s *session) copyPlan(ctx context.Context, upd *autov1alpha1.Update, stackName string, round int32, patch []byte) (name, digest, failure string, err error) {
	name = change.PlanSecretName(s.p.Name, stackName, round)
	if upd.Status.Plan == "" {
		return "", "", fmt.Sprintf("the preview of Stack %s (Update %s) saved no plan: %s", stackName, upd.Name, upd.Status.Message), nil
	}
	saved, err := get(ctx, s.r.Client, s.p.Namespace, "Secret", upd.Status.Plan, &corev1.Secret{})
	switch {
	case err != nil:
		return "", "", "", err
	case saved == nil || len(saved.Data[autov1alpha1.PlanKey]) == 0:
		return "", "", fmt.Sprintf("the plan of the preview of Stack %s (Secret %s) is gone", stackName, upd.Status.Plan), nil
	case !metav1.IsControlledBy(saved, upd):
		// The Update controller makes the plan Secret owned by the Update;
		// one of anyone else's would bind the approvals to their plan.
		return "", "", fmt.Sprintf("the plan of the preview of Stack %s (Secret %s) does not belong to Update %s", stackName, upd.Status.Plan, upd.Name), nil
	}
	plan := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   s.p.Namespace,
			Labels:      map[string]string{PromotionLabel: s.p.Name, StackLabel: stackName},
			Annotations: map[string]string{change.PlanCommitAnnotation: s.release.Spec.Commit.SHA},
		},
		Immutable: ptr.To(true),
		Type:      corev1.SecretTypeOpaque,
		Data:      map[string][]byte{autov1alpha1.PlanKey: saved.Data[autov1alpha1.PlanKey]},
	}
	if diff := saved.Data[autov1alpha1.DiffKey]; len(diff) > 0 {
		plan.Data[autov1alpha1.DiffKey] = diff
	}
	if len(patch) > 0 {
		plan.Data[promotionv1alpha1.SourcePatchKey] = patch
	}
	digest = change.PlanDigest(plan)
	// Its name can be worked out, and anyone who may create Secrets may
	// make one under it first, claiming the promotion as its controller:
	// an existing one is the copy an earlier reconcile made only when it
	// holds exactly what the copy holds (what the approvals are bound to).
	copied, err := get(ctx, s.r.Client, s.p.Namespace, "Secret", name, &corev1.Secret{})
	if err == nil && copied == nil {
		// Read back what the create left: one made between the read and
		// the create is checked like any other.
		if err := s.createOwned(ctx, plan.DeepCopy()); err != nil {
			return "", "", "", err
		}
		copied, err = get(ctx, s.r.Client, s.p.Namespace, "Secret", name, &corev1.Secret{})
		if err == nil && copied == nil {
			return "", "", "", fmt.Errorf("the copy of the plan, Secret %s, is gone right after it was made", name)
		}
	}
	switch {
	case err != nil:
		return "", "", "", err
	case !metav1.IsControlledBy(copied, s.p) || !ptr.Deref(copied.Immutable, false) || change.PlanDigest(copied) != digest:
		return "", "", fmt.Sprintf("Secret %s, where the plan of the preview of Stack %s goes, exists and is not the copy the promotion made "+
			"(its controller, immutability or content differ): delete it and promote again", name, stackName), nil
	}
	return name, digest, "", nil
}

// planInputs are the plan digest's inputs that the previews add: for each
// Stack previewed, the sha256 of what the promotion's plan Secret holds
// for it (change.PlanDigest; "" when the Secret is gone), so that approvals are
// bound to the exact plan the Stacks will be held to and to what the
// approvers were shown. The Secrets are read live.
func (s *session) planInputs(ctx context.Context) ([]change.Input, error) {
	var inputs []change.Input
	for _, pv := range s.recs.previews {
		if pv.Plan == "" {
			continue
		}
		sec, err := get(ctx, s.r.APIReader, s.p.Namespace, "Secret", pv.Plan, &corev1.Secret{})
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, change.Input{Name: "Plan/" + pv.Name, Value: change.PlanDigest(sec)})
	}
	return inputs, nil
}

// pinOf is what promotion pins the Stack name with: the plan Secret it
// holds for it, and the digest of what that plan and the Stack's inputs
// were when they were previewed (change.PinDigest; "" for a preview
// recorded before previews recorded both). A running promotion's records
// are not loaded (loadRecords): the Stack's is read live, once per pin,
// since a record the cache has not caught up with would pin the Stack to
// no plan, or an older one. No record, or one without a plan, is an
// error: a Stack is never pinned without the plan that was approved.
func (s *session) pinOf(ctx context.Context, name string) (plan, inputs string, err error) {
	var pv *promotionv1alpha1.StackPreview
	if s.recs.loaded != nil {
		if recorded := s.recordedPreview(name); recorded.Plan != "" {
			pv = &recorded
		}
	} else if pv, err = change.PreviewOf(ctx, s.r.APIReader, s.p, name); err != nil {
		return "", "", sreconcile.NewGeneric("", err)
	}
	switch {
	case pv == nil || pv.Plan == "":
		return "", "", fmt.Errorf("promotion %s has no record of the plan its preview of Stack %s saved (StackPromotion %s): promote again",
			s.p.Name, name, change.StackPromotionName(s.p.Name, name))
	case pv.Inputs == "" || pv.PlanDigest == "":
		return pv.Plan, "", nil
	}
	inputs, err = change.PinDigest(pv.Inputs, pv.PlanDigest)
	return pv.Plan, inputs, err
}

// violatesPlan reports whether a Stack's failure message says its update
// was refused for doing what its plan does not allow.
func violatesPlan(msg string) bool { return strings.Contains(msg, "violates plan") }

// planViolation is the promotion's message when the Stack name's update
// was refused by its plan: an input changed since the preview.
func planViolation(name, msg string) string {
	return sreconcile.Truncate(fmt.Sprintf("Stack %s: the update was refused because the inputs changed since the preview "+
		"that was approved (it violates the plan saved then), and nothing the plan did not allow was applied; "+
		"promote again for a new preview and new approvals: %s", name, msg), maxMessage)
}

// planAnnotations are the annotations that hold a pinned Stack's next up
// to plan, made for commit, with the digest of the inputs it was made from
// when there is one; none without a plan.
func planAnnotations(plan, commit, inputs string) map[string]any {
	if plan == "" {
		return nil
	}
	a := map[string]any{change.PlanAnnotation: plan, change.PlanCommitAnnotation: commit}
	if inputs != "" {
		a[change.InputsAnnotation] = inputs
	}
	return a
}
