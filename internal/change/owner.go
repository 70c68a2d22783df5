package change

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// CompareAge orders objects from the oldest to the newest: by
// creationTimestamp, then by name. The newest Pending promotion of a stage
// runs next; retention keeps the newest records.
func CompareAge(a, b metav1.Object) int {
	if c := a.GetCreationTimestamp().Compare(b.GetCreationTimestamp().Time); c != 0 {
		return c
	}
	return strings.Compare(a.GetName(), b.GetName())
}

// AuthorizedStage is the stage a Stack with these annotations consents to
// be deployed by, or "" for none.
func AuthorizedStage(stackAnnotations map[string]string) string {
	return stackAnnotations[promotionv1alpha1.AuthorizedStageAnnotation]
}

// Binds reports whether the stage lists the Stack named stack in
// spec.stacks.
func Binds(st *promotionv1alpha1.Stage, stack string) bool {
	return slices.ContainsFunc(st.Spec.Stacks, func(b promotionv1alpha1.StackBinding) bool { return b.Name == stack })
}

// Owns reports whether the stage deploys the Stack named stack, whose
// annotations are given: the stage lists it, the Stack consents to it
// (AuthorizedStageAnnotation), and the stage is neither preview-only (it
// never changes a Stack) nor being deleted.
func Owns(st *promotionv1alpha1.Stage, stack string, stackAnnotations map[string]string) bool {
	return Binds(st, stack) && AuthorizedStage(stackAnnotations) == st.Name &&
		!st.Spec.PreviewOnly && st.DeletionTimestamp.IsZero()
}

// OwnerOf returns, of stages, the one that deploys the Stack named stack
// with these annotations (see Owns), or nil. There is at most one: the
// Stack names a single stage.
func OwnerOf(stages []promotionv1alpha1.Stage, stack string, stackAnnotations map[string]string) *promotionv1alpha1.Stage {
	for i := range stages {
		if Owns(&stages[i], stack, stackAnnotations) {
			return &stages[i]
		}
	}
	return nil
}

// Unauthorized explains why stage, which lists the Stack, may not deploy
// it, or "" when it may: the message a stage's status shows.
func Unauthorized(stage string, stack string, stackAnnotations map[string]string) string {
	switch got := AuthorizedStage(stackAnnotations); got {
	case stage:
		return ""
	case "":
		return "Stack " + quote(stack) + " does not name a stage that may deploy it: a governor must annotate it " +
			promotionv1alpha1.AuthorizedStageAnnotation + "=" + stage
	default:
		return "Stack " + quote(stack) + " may be deployed only by Stage " + quote(got) +
			" (" + promotionv1alpha1.AuthorizedStageAnnotation + "); remove it from one of the stages"
	}
}

func quote(s string) string { return `"` + s + `"` }
