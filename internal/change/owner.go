package change

import (
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

// Unauthorized is the rule of ownership: it explains why stage, which lists
// the Stack, may not deploy it, or "" when it may (the Stack names that
// stage in AuthorizedStageAnnotation; one annotation, so one stage). The
// Stage and Promotion controllers and the dashboard all ask it; a
// preview-only stage changes no Stack and needs no consent, so they do
// not ask it for one.
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
