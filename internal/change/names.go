package change

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
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

// pinRequestPrefix begins the reconcile request (the Stack's
// pulumi.com/reconciliation-request annotation) a promotion pins a Stack
// with.
const pinRequestPrefix = "promotion/"

// PinRequest is the reconcile request a promotion pins its Stacks with:
// its name and UID, so that no other promotion's, not even one of the same
// name, is taken for it. Setting it makes the Stack run its next up even
// when nothing else changed (the same release promoted again).
func PinRequest(promotionName, uid string) string {
	return pinRequestPrefix + promotionName + "/" + uid
}

// IsPinRequest reports whether a reconcile request is one a promotion
// set.
func IsPinRequest(request string) bool { return strings.HasPrefix(request, pinRequestPrefix) }

// ParsePinRequest is the promotion's name and UID in a reconcile request
// PinRequest made; ok is false for any other request.
func ParsePinRequest(request string) (name, uid string, ok bool) {
	rest, found := strings.CutPrefix(request, pinRequestPrefix)
	if !found {
		return "", "", false
	}
	i := strings.LastIndex(rest, "/")
	if i <= 0 || i == len(rest)-1 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// maxPreviewName keeps a preview Workspace's name short enough for what a
// runtime derives from it (the kubernetes runtime's StatefulSet
// "<name>-workspace", whose pods' revision label adds 11 more characters
// under the 63 of a label value).
const maxPreviewName = 42

// PreviewName is the name of the Workspace, and of the first Update, that
// previews the Stack stackName for the promotion promotionName, in its
// round-th preview (a Stack is previewed again when its inputs change
// before the promotion starts). The first round's is
// "<promotion>-<stack>", or, when that is longer than 42 characters, its
// beginning and a digest of the whole; a later round's always ends in a
// digest that includes the round, so that no round's name is another's.
func PreviewName(promotionName, stackName string, round int32) string {
	name := promotionName + "-" + stackName
	if round <= 1 && len(name) <= maxPreviewName {
		return name
	}
	key := promotionName + "\x00" + stackName
	if round > 1 {
		key += "\x00" + strconv.Itoa(int(round))
	}
	sum := sha256.Sum256([]byte(key))
	prefix := strings.TrimRight(name[:min(len(name), maxPreviewName-9)], "-.")
	return prefix + "-" + hex.EncodeToString(sum[:])[:8]
}

// planSecretSuffix ends the name of a promotion's plan Secret: a dot,
// unlike the "-plan" of the Secret where a preview Update saves its plan
// (auto.pulumi.com), so that the two never meet.
const planSecretSuffix = ".plan"

// PlanSecretName is the name of the promotion's Secret holding the plan of
// the round-th preview of the Stack stackName: PreviewName's, with
// ".plan".
func PlanSecretName(promotionName, stackName string, round int32) string {
	return PreviewName(promotionName, stackName, round) + planSecretSuffix
}

// PullRequestPreviewName is the name of the Workspace and Update that
// preview commit head of pull request number of the Pipeline pipeline
// against the Stack stackName: "<pipeline>-pr<number>-<stack>-<head[:7]>",
// bounded as PreviewName bounds its names.
func PullRequestPreviewName(pipeline string, number int64, stackName, head string) string {
	return PreviewName(pipeline+"-pr"+strconv.FormatInt(number, 10), stackName+"-"+ShortCommit(head), 1)
}

// ShortCommit is the abbreviated form of a commit SHA everywhere stackyard
// shows one (messages, events, the CLI, the dashboard): its first 7 hex
// digits, as git shows it.
func ShortCommit(sha string) string {
	return sha[:min(len(sha), 7)]
}

// HeldChangeName is the name of the promotion a stage asks for to deploy
// the change with digest held on Stack stack (the Stack's
// status.heldSpec): the stage's name and a digest of the three, so that
// each change is asked for once.
func HeldChangeName(stage, stack, digest string) string {
	h := sha256.Sum256([]byte(stage + "\x00" + stack + "\x00" + digest))
	return stage + "-held-" + hex.EncodeToString(h[:])[:10]
}

// maxStackName is the longest Stack name (pulumiv1.MaxStackNameLength).
const maxStackName = 42

// ReviewStackName is the name of the review stack of pull request number
// of the Pipeline pipeline: "<pipeline>-pr-<number>", or, when that is
// longer than a Stack's name may be (42), the pipeline's name cut, a
// digest of it, and "-pr-<number>", so that two pipelines whose names
// begin alike never share one.
func ReviewStackName(pipeline string, number int64) string {
	suffix := "-pr-" + strconv.FormatInt(number, 10)
	if len(pipeline)+len(suffix) <= maxStackName {
		return pipeline + suffix
	}
	sum := sha256.Sum256([]byte(pipeline))
	prefix := strings.TrimRight(pipeline[:max(0, min(len(pipeline), maxStackName-len(suffix)-9))], "-.")
	return prefix + "-" + hex.EncodeToString(sum[:])[:8] + suffix
}
