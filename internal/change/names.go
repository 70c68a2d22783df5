package change

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// A promotion holds each Stack's next up to the plan its preview saved
// (`pulumi up --plan`). It pins the Stack with two annotations, set in the
// same server-side apply as spec.commit, and keeps the plan in a Secret of
// its own that carries the same commit annotation.
const (
	// PlanAnnotation, on a Stack, names the Secret in the Stack's
	// namespace whose key "plan" holds the plan its next up is held to.
	PlanAnnotation = "promotion.stackyard.dev/plan"
	// PlanCommitAnnotation is the commit a plan was made for: on a Stack,
	// the plan holds only ups of that commit; on a plan Secret, the commit
	// it was previewed at.
	PlanCommitAnnotation = "promotion.stackyard.dev/plan-commit"
)

// maxPreviewName keeps a preview Workspace's name short enough for what a
// runtime derives from it (the kubernetes runtime's StatefulSet
// "<name>-workspace", whose pods' revision label adds 11 more characters
// under the 63 of a label value).
const maxPreviewName = 42

// PreviewName is the name of the Workspace, and of the first Update, that
// previews the Stack stackName for the promotion promotionName:
// "<promotion>-<stack>", or, when that is longer than 42 characters, its
// beginning and a digest of the whole.
func PreviewName(promotionName, stackName string) string {
	name := promotionName + "-" + stackName
	if len(name) <= maxPreviewName {
		return name
	}
	sum := sha256.Sum256([]byte(promotionName + "\x00" + stackName))
	prefix := strings.TrimRight(name[:maxPreviewName-9], "-.")
	return prefix + "-" + hex.EncodeToString(sum[:])[:8]
}

// planSecretSuffix ends the name of a promotion's plan Secret: a dot,
// unlike the "-plan" of the Secret where a preview Update saves its plan
// (auto.pulumi.com), so that the two never meet.
const planSecretSuffix = ".plan"

// PlanSecretName is the name of the promotion's Secret holding the plan of
// its preview of the Stack stackName: PreviewName's, with ".plan".
func PlanSecretName(promotionName, stackName string) string {
	return PreviewName(promotionName, stackName) + planSecretSuffix
}
