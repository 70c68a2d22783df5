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

// Unauthorized is the rule of ownership: it explains why stage, which lists
// the Stack, may not deploy it, or "" when it may (the Stack names that
// stage in AuthorizedStageAnnotation; one annotation, so one stage). The
// Stage and Promotion controllers and the dashboard all ask it; a
// preview-only stage changes no Stack, and asks NoPreview instead.
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

// PreviewStages are the stages a Stack with these annotations lets preview
// it besides the one it names in AuthorizedStageAnnotation
// (PreviewStagesAnnotation, comma-separated; blanks ignored).
func PreviewStages(stackAnnotations map[string]string) []string {
	var out []string
	for _, s := range strings.Split(stackAnnotations[promotionv1alpha1.PreviewStagesAnnotation], ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// NoPreview is the rule of consent for running a Stack's program without
// deploying it: it explains why stage may not preview the Stack (a
// preview-only stage's promotion, a promotion's preview, a pull request's
// preview), or "" when it may. A preview runs the program with the
// Stack's credentials, so a governed Stack (one that names a stage) is
// previewed only by that stage and the stages PreviewStages lists; an
// ungoverned one by any, as upstream. The Stage, Promotion and
// pull-request controllers ask it before they make a preview, and the
// operator's choke point (Authorize) asks it again before the preview
// runs.
func NoPreview(stage string, stack string, stackAnnotations map[string]string) string {
	governor := AuthorizedStage(stackAnnotations)
	if governor == "" || governor == stage || slices.Contains(PreviewStages(stackAnnotations), stage) {
		return ""
	}
	return "Stack " + quote(stack) + " is governed by stage " + quote(governor) + " and does not let stage " + quote(stage) +
		" preview it (a preview runs its program with its credentials): a governor of stage " + quote(governor) +
		" may add it to the annotation " + promotionv1alpha1.PreviewStagesAnnotation
}

// Unconsented is the consent a stage needs from each Stack it lists: it
// explains why stage may not use the Stack, or "" when it may. A stage
// that deploys needs the Stack's consent to deploy it (Unauthorized); a
// preview-only stage, its consent to preview it (NoPreview). Every
// controller that reads a stage's Stacks, and the dashboard, ask it.
func Unconsented(stage string, previewOnly bool, stack string, stackAnnotations map[string]string) string {
	if previewOnly {
		return NoPreview(stage, stack, stackAnnotations)
	}
	return Unauthorized(stage, stack, stackAnnotations)
}

func quote(s string) string { return `"` + s + `"` }
