package promotion

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
// in status.previews[].plan, whose digest is an input of the plan digest
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
// the copy's name. A preview that saved no plan is a failure of the
// preview, returned as failure.
func (s *session) copyPlan(ctx context.Context, upd *autov1alpha1.Update, stackName string, round int32, patch []byte) (name, failure string, err error) {
	name = change.PlanSecretName(s.p.Name, stackName, round)
	copied, err := get(ctx, s.r.Client, s.p.Namespace, "Secret", name, &corev1.Secret{})
	switch {
	case err != nil:
		return "", "", err
	case copied != nil && !metav1.IsControlledBy(copied, s.p):
		return "", fmt.Sprintf("Secret %s, where the plan of the preview of Stack %s goes, exists and does not belong to the promotion", name, stackName), nil
	case copied != nil:
		return name, "", nil
	}
	if upd.Status.Plan == "" {
		return "", fmt.Sprintf("the preview of Stack %s (Update %s) saved no plan: %s", stackName, upd.Name, upd.Status.Message), nil
	}
	saved, err := get(ctx, s.r.Client, s.p.Namespace, "Secret", upd.Status.Plan, &corev1.Secret{})
	switch {
	case err != nil:
		return "", "", err
	case saved == nil || len(saved.Data[autov1alpha1.PlanKey]) == 0:
		return "", fmt.Sprintf("the plan of the preview of Stack %s (Secret %s) is gone", stackName, upd.Status.Plan), nil
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
	return name, "", s.createOwned(ctx, plan)
}

// reviewedKeys are the keys of a promotion's plan Secret that its digest
// covers: the plan the Stack is held to, and the value diff and the patch
// the approvers read, so that an approval is bound to what they saw too.
var reviewedKeys = []string{autov1alpha1.PlanKey, autov1alpha1.DiffKey, promotionv1alpha1.SourcePatchKey}

// planInputs are the plan digest's inputs that the previews add: for each
// Stack previewed, the sha256 of what the promotion's plan Secret holds
// for it (reviewedKeys; "" when the Secret is gone), so that approvals are
// bound to the exact plan the Stacks will be held to and to what the
// approvers were shown. The Secrets are read live.
func (s *session) planInputs(ctx context.Context) ([]planInput, error) {
	var inputs []planInput
	for _, pv := range s.p.Status.Previews {
		if pv.Plan == "" {
			continue
		}
		sec, err := get(ctx, s.r.APIReader, s.p.Namespace, "Secret", pv.Plan, &corev1.Secret{})
		if err != nil {
			return nil, err
		}
		digest := ""
		if sec != nil {
			h := sha256.New()
			for _, key := range reviewedKeys {
				fmt.Fprintf(h, "%s:%d:", key, len(sec.Data[key]))
				h.Write(sec.Data[key])
			}
			digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
		}
		inputs = append(inputs, planInput{Name: "Plan/" + pv.Name, Value: digest})
	}
	return inputs, nil
}

// planOf is the plan Secret the promotion holds for the Stack name, or "".
func (s *session) planOf(name string) string {
	for _, pv := range s.p.Status.Previews {
		if pv.Name == name {
			return pv.Plan
		}
	}
	return ""
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
// to plan, made for commit; none without a plan.
func planAnnotations(plan, commit string) map[string]any {
	if plan == "" {
		return nil
	}
	return map[string]any{change.PlanAnnotation: plan, change.PlanCommitAnnotation: commit}
}

// pinnedWithPlan reports whether the Stack's plan annotations are those
// planAnnotations gives for plan and commit.
func pinnedWithPlan(annotations map[string]string, plan, commit string) bool {
	if plan == "" {
		return true
	}
	return annotations[change.PlanAnnotation] == plan && annotations[change.PlanCommitAnnotation] == commit
}
