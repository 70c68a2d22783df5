package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PromotionPhase is where a Promotion is in its life.
//
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;Aborted
type PromotionPhase string

const (
	// PromotionPending: waiting for its turn, a window, or the freeze to
	// end.
	PromotionPending PromotionPhase = "Pending"
	// PromotionRunning: the stage's Stacks are pinned to the release and
	// their updates run.
	PromotionRunning PromotionPhase = "Running"
	// PromotionSucceeded: every Stack of the stage is Ready at the
	// release's commit (in a preview-only stage: every preview
	// succeeded).
	PromotionSucceeded PromotionPhase = "Succeeded"
	// PromotionFailed: a preview failed, a Stack's update failed or
	// stalled, or the promotion could not be applied.
	PromotionFailed PromotionPhase = "Failed"
	// PromotionAborted: superseded by a newer request before it started,
	// or refused (a release that does not exist, a stage that is gone).
	PromotionAborted PromotionPhase = "Aborted"
)

// IsFinished reports whether p is a final phase.
func (p PromotionPhase) IsFinished() bool {
	return p == PromotionSucceeded || p == PromotionFailed || p == PromotionAborted
}

// PromotionReasonAwaitingApproval is status.reason of a Pending promotion
// whose previews and policies are done and that waits for people to
// approve it: the one fact alerts, the dashboard, the CLI and the APIs
// read for "awaiting approval".
const PromotionReasonAwaitingApproval = "AwaitingApproval"

// AwaitsApproval reports whether the promotion is Pending and waits for
// approvals (status.reason AwaitingApproval).
func (p *Promotion) AwaitsApproval() bool {
	return p.Status.Phase == PromotionPending && p.Status.Reason == PromotionReasonAwaitingApproval
}

// WaveAwaitingApproval is the wave of a running promotion's rollout that
// waits for approvals of its own (rollout.approveEachWave), or 0 when
// none does.
func (p *Promotion) WaveAwaitingApproval() int32 {
	ro := p.Status.Rollout
	if p.Status.Phase != PromotionRunning || p.Status.Reason != PromotionReasonAwaitingApproval || ro == nil || ro.Approval == nil || ro.Approval.ApprovedTime != nil {
		return 0
	}
	return ro.Approval.Wave
}

// RequestedByAutoPromotion is spec.requestedBy of a promotion the
// operator started by itself.
const RequestedByAutoPromotion = "stackyard:auto-promotion"

// PromotionSpec asks for one release in one stage. It never changes.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a Promotion is a record: its spec cannot change"
type PromotionSpec struct {
	// Stage is the Stage to promote into, in the same namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Stage string `json:"stage"`

	// Release is the Release to promote, of the stage's pipeline.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Release string `json:"release"`

	// Rollback marks a promotion of an earlier release that was verified
	// in the stage, asked for to undo a later one.
	// +optional
	Rollback bool `json:"rollback,omitempty"`

	// RequestedBy is who asked: the user name the API server
	// authenticated (the admission policy in config/policy refuses any
	// other value), or "stackyard:auto-promotion".
	// +optional
	// +kubebuilder:validation:MaxLength=512
	RequestedBy string `json:"requestedBy,omitempty"`

	// Reason says why, in the requester's words.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`

	// HeldChange makes this the promotion of a change held on one Stack
	// of the stage (its status.heldSpec): the release the stage runs,
	// with the spec the Stack holds. It previews that Stack alone and
	// goes through every gate of the stage; the approval of whoever made
	// the change does not count. The Stage asks for it by itself.
	// +optional
	HeldChange *HeldChangeRef `json:"heldChange,omitempty"`
}

// HeldChangeRef names a change held on a Stack.
type HeldChangeRef struct {
	// Stack is the Stack that holds the change.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Stack string `json:"stack"`
	// Digest is the held spec's digest (the Stack's
	// status.heldSpec.digest): a newer change supersedes this promotion,
	// and reverting the spec withdraws it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Digest string `json:"digest"`
}

// Why a promotion of a held change was aborted (status.endReason).
const (
	// EndReasonSuperseded: the Stack holds a newer change.
	EndReasonSuperseded = "Superseded"
	// EndReasonWithdrawn: the Stack no longer holds a change: its spec
	// was reverted, or approved otherwise.
	EndReasonWithdrawn = "Withdrawn"
)

// PromotedStack is what a promotion changed on one Stack.
type PromotedStack struct {
	// Name is the Stack's name.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// PreviousCommit is the Stack's spec.commit before the promotion.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	PreviousCommit string `json:"previousCommit,omitempty"`
	// Commit is the commit the promotion pinned.
	// +kubebuilder:validation:MaxLength=64
	Commit string `json:"commit"`
	// Update is the Update that deployed it.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Update string `json:"update,omitempty"`
	// Message is the Stack's state at the end of the promotion, cut at
	// 256 bytes (the Stack's own status has the rest).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message,omitempty"`
	// Wave is the rollout wave that deploys the Stack, from 1 (the stage's
	// spec.rollout); 0 without one.
	// +optional
	Wave int32 `json:"wave,omitempty"`
	// State is Pending, Updating, Succeeded, Failed or Skipped.
	// +optional
	State RolloutStackState `json:"state,omitempty"`
}

// PromotionStatus is the promotion's progress and outcome. Once the phase
// is final nothing in it changes.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.phase) || !(oldSelf.phase in ['Succeeded', 'Failed', 'Aborted']) || self == oldSelf",message="a finished Promotion is a record: its status cannot change"
type PromotionStatus struct {
	// Phase is Pending, Running, Succeeded, Failed or Aborted.
	// +optional
	Phase PromotionPhase `json:"phase,omitempty"`

	// Message says why the promotion waits, or how it ended. While the
	// promotion is Pending or Running it also shows a failure the operator
	// is retrying (an API call refused, for instance).
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`

	// Reason is, while the promotion is Pending or Running and waits, why
	// it waits, as one word: the typed half of message. AwaitingApproval
	// says that its previews and policies are done and people must approve
	// it (message says how many, and from whom). Empty when it does not
	// wait, and once it has finished.
	// +optional
	Reason string `json:"reason,omitempty"`

	// EndReason is, for a promotion that ended without deploying, why, as
	// one word where the operator knows it: Superseded or Withdrawn for a
	// held change (spec.heldChange).
	// +optional
	EndReason string `json:"endReason,omitempty"`

	// Commit is the release's commit.
	// +optional
	Commit string `json:"commit,omitempty"`

	// StartTime is when the promotion started: its Stacks' previous
	// commits were recorded, and then the Stacks were pinned. A promotion
	// that ended with its previews (a failed preview, a preview-only
	// stage) records when they ended.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// EndTime is when the promotion ended.
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`

	// Stacks is what the promotion changed, Stack by Stack, in the order
	// of its rollout.
	// +optional
	// +kubebuilder:validation:MaxItems=1000
	Stacks []PromotedStack `json:"stacks,omitempty"`

	// Previewed counts the Stacks whose preview succeeded. Each preview,
	// with the changes it would make from a `pulumi preview` of the
	// release's commit with the Stack's configuration, run before
	// anything changes, is recorded in a StackPromotion of its own,
	// controlled by this Promotion, whose field promotion names it.
	// +optional
	Previewed int32 `json:"previewed,omitempty"`
	// Previewing counts the Stacks whose preview has not ended.
	// +optional
	Previewing int32 `json:"previewing,omitempty"`

	// Previews are the previews of a promotion made before its Stacks'
	// previews had StackPromotions of their own. Deprecated: never
	// written; the operator reads them for such a promotion only, and
	// moves those of a Pending one into StackPromotions.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	Previews []StackPreview `json:"previews,omitempty"`

	// PlanDigest identifies what was previewed (the release's commit, the
	// Stacks' configuration and the versions of the Secrets they read, and
	// the previews' plans): approvals count only for this digest.
	// +optional
	PlanDigest string `json:"planDigest,omitempty"`

	// Policies are the results of the stage's policy rules on the
	// previews, rule by rule, computed once every preview succeeded and
	// again whenever a Stack is previewed again.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Policies []PolicyResult `json:"policies,omitempty"`

	// Approvals are the decisions that count, for PlanDigest.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Approvals []ApprovalRecord `json:"approvals,omitempty"`

	// Verification is the progress of the stage's checks.
	// +optional
	Verification *VerificationStatus `json:"verification,omitempty"`
	// Rollout is the progress through the stage's waves: counts of Stacks
	// by state, and whether it halted. Set once the promotion started.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`
}

// ChangeSummary counts the changes of a preview by operation.
type ChangeSummary struct {
	// Create, Update, Replace and Delete count resources.
	Create  int32 `json:"create"`
	Update  int32 `json:"update"`
	Replace int32 `json:"replace"`
	Delete  int32 `json:"delete"`
	// Same counts resources left as they are.
	// +optional
	Same int32 `json:"same,omitempty"`
}

// ResourceChange is one resource a preview would change.
type ResourceChange struct {
	// URN is the resource's URN.
	URN string `json:"urn"`
	// Type is the resource's type token, e.g. aws:rds/instance:Instance.
	// +optional
	Type string `json:"type,omitempty"`
	// Op is create, update, replace or delete.
	Op string `json:"op"`
	// Properties names the changed properties (names only, never values).
	// +optional
	Properties []string `json:"properties,omitempty"`
}

// StackPreview is the preview of one Stack.
type StackPreview struct {
	// Name is the Stack's name.
	Name string `json:"name"`
	// Update is the preview Update (auto.pulumi.com), owned by the
	// promotion and kept with it as the record of the preview.
	// +optional
	Update string `json:"update,omitempty"`
	// Recorded are the UIDs of the preview's Workspace and Update, as the
	// API server gave them to the promotion when it made them: an object
	// under their names with another UID is not the preview's, and runs
	// nothing.
	// +optional
	Recorded *PreviewRecord `json:"recorded,omitempty"`
	// Summary counts the changes; unset until the preview succeeded.
	// +optional
	Summary *ChangeSummary `json:"summary,omitempty"`
	// Changes lists the resources that would change, at most 200.
	// +optional
	// +kubebuilder:validation:MaxItems=200
	Changes []ResourceChange `json:"changes,omitempty"`
	// Plan is the promotion's Secret (key "plan") holding the update plan
	// the preview saved. The Stack's up is held to it (`pulumi up --plan`),
	// so that only what was previewed can happen; its digest is part of
	// planDigest. The same Secret holds, under the key "diff", the value
	// diff approvers read (old and new value of every changed property,
	// secrets as "[secret]"): who may read Secrets in the namespace may
	// read it, and the dashboard shows it to those who may list Stacks
	// there. The key "source.patch" holds the unified diff of the code
	// (see source).
	// +optional
	Plan string `json:"plan,omitempty"`
	// PlanDigest is the sha256 of what the plan Secret held when the
	// promotion made it (its plan, value diff and code patch). The pin
	// carries it, with inputs, in the Stack's annotation
	// promotion.stackyard.dev/plan-inputs, and the Stack runs its up only
	// while both still match: a plan Secret replaced, or a Secret or
	// ConfigMap the Stack reads changed, after the promotion started stalls
	// the Stack instead of running what nobody approved.
	// +optional
	PlanDigest string `json:"planDigest,omitempty"`
	// Message says how the preview ended.
	// +optional
	Message string `json:"message,omitempty"`
	// Inputs is a digest of what the Stack's update reads apart from the
	// commit (its spec and the versions of the Secrets and ConfigMaps it
	// reads) when the preview started. When it no longer matches, the
	// Stack is previewed again before anyone is asked to approve, so that
	// the plan approved is the plan that runs.
	// +optional
	Inputs string `json:"inputs,omitempty"`
	// Round counts the previews of this Stack in the promotion: 1, then
	// one more each time its inputs changed before the start.
	// +optional
	Round int32 `json:"round,omitempty"`
	// Source is the code the promotion brings to the Stack: the commits
	// between the one it runs and the release's, and the files changed
	// under its repoDir.
	// +optional
	Source *SourceChange `json:"source,omitempty"`
}

// SourcePatchKey is the key, in the Secret a preview's plan names, of the
// unified diff of the files the promotion changes under the Stack's
// repoDir (at most 256 KiB).
const SourcePatchKey = "source.patch"

// CommitInfo is one commit of a release's history.
type CommitInfo struct {
	// SHA is the full commit SHA.
	SHA string `json:"sha"`
	// Subject is the first line of the commit message.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Subject string `json:"subject,omitempty"`
	// Author is "Name <email>".
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Author string `json:"author,omitempty"`
	// Time is the commit's author time.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}

// SourceChange is the code between the commit a Stack runs and the one a
// promotion brings.
type SourceChange struct {
	// From is the commit the Stack ran when the promotion previewed it;
	// empty for a Stack that never ran one.
	// +optional
	From string `json:"from,omitempty"`
	// To is the release's commit.
	To string `json:"to"`
	// Reverse says that To is an ancestor of From: the promotion takes
	// the commits listed back out (a rollback).
	// +optional
	Reverse bool `json:"reverse,omitempty"`
	// Commits are the commits between From and To, newest first, at most
	// 50; CommitCount says how many there are in all.
	// +optional
	// +kubebuilder:validation:MaxItems=50
	Commits []CommitInfo `json:"commits,omitempty"`
	// CommitCount is the number of commits between From and To.
	// +optional
	CommitCount int32 `json:"commitCount,omitempty"`
	// Paths are the files changed under the Stack's repoDir, relative to
	// the repository's root, at most 200; PathCount says how many there
	// are in all.
	// +optional
	// +kubebuilder:validation:MaxItems=200
	Paths []string `json:"paths,omitempty"`
	// PathCount is the number of files changed under repoDir.
	// +optional
	PathCount int32 `json:"pathCount,omitempty"`
	// Message says why the history could not be read, when it could not.
	// +optional
	Message string `json:"message,omitempty"`
}

// PolicyResult is the outcome of one of the stage's policy rules on a
// promotion's previews.
type PolicyResult struct {
	// Name is the rule's name.
	Name string `json:"name"`
	// Fired says the rule's expression was true.
	Fired bool `json:"fired"`
	// Action is the rule's action.
	Action PolicyAction `json:"action"`
	// Message is the rule's message (its name when it has none), when it
	// fired.
	// +optional
	Message string `json:"message,omitempty"`
	// Required is how many approvals a fired RequireApproval rule needs.
	// +optional
	Required int32 `json:"required,omitempty"`
	// From is who counts for those approvals; empty: anyone allowed to
	// approve.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	From []Approver `json:"from,omitempty"`
	// RequireEach says each entry of From must approve.
	// +optional
	RequireEach bool `json:"requireEach,omitempty"`
}

// ApprovalRecord is one decision on a promotion, as the Approval recorded
// it.
type ApprovalRecord struct {
	// Approval is the Approval object.
	Approval string `json:"approval"`
	// User is who decided.
	User string `json:"user"`
	// Groups are the user's groups when they decided.
	// +optional
	Groups []string `json:"groups,omitempty"`
	// Decision is Approve or Reject.
	Decision ApprovalDecision `json:"decision"`
	// Comment is the approver's words.
	// +optional
	Comment string `json:"comment,omitempty"`
	// Time is when the decision was made.
	Time metav1.Time `json:"time"`
}

// VerificationStatus is the progress of a stage's checks on a promotion.
type VerificationStatus struct {
	// Phase is Running, Succeeded or Failed.
	Phase string `json:"phase"`
	// StartTime is when the checks began.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// Checks are the checks' results.
	// +optional
	Checks []CheckStatus `json:"checks,omitempty"`
	// Message says how verification ended: which check failed and why,
	// or that all passed.
	// +optional
	Message string `json:"message,omitempty"`
}

// CheckStatus is one check's measurements.
type CheckStatus struct {
	// Name is the check's name.
	Name string `json:"name"`
	// Phase is Running, Succeeded or Failed.
	Phase string `json:"phase"`
	// Successes and Failures count measurements (an Error counts as a
	// failure).
	Successes int32 `json:"successes"`
	Failures  int32 `json:"failures"`
	// Measurements are the last measurements, at most 10.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	Measurements []Measurement `json:"measurements,omitempty"`
}

// Measurement is one measurement of a check.
type Measurement struct {
	// Time is when it was taken.
	Time metav1.Time `json:"time"`
	// Phase is Successful, Failed or Error.
	Phase string `json:"phase"`
	// Value is the measured value, cut to 256 bytes.
	// +optional
	Value string `json:"value,omitempty"`
	// Message says what went wrong, for an error.
	// +optional
	Message string `json:"message,omitempty"`
}

// Promotion moves one Release into one Stage: it pins the stage's Stacks
// to the release's commit and follows their updates to an outcome.
// Promotions are the stage's audit trail: nobody can change one once it has
// finished.
//
// The queue rule: one Promotion runs per stage at a time, and a Running one
// is never interrupted. Of the Pending promotions of a stage, the newest
// (by creationTimestamp, then name) runs next; the older ones are Aborted
// with the message "superseded by <name>". A Pending promotion also waits
// for the stage's promotion windows; it is Aborted when it names a release
// or stage that does not exist, a release of another pipeline, a frozen
// stage, or, as a rollback, a release never verified in the stage.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName={sypromotion,sypromo},categories=stackyard
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Stage",type=string,JSONPath=`.spec.stage`
// +kubebuilder:printcolumn:name="Release",type=string,JSONPath=`.spec.release`
// +kubebuilder:printcolumn:name="Rollback",type=boolean,priority=10,JSONPath=`.spec.rollback`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="By",type=string,priority=10,JSONPath=`.spec.requestedBy`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:selectablefield:JSONPath=`.spec.stage`
type Promotion struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the request.
	Spec PromotionSpec `json:"spec"`
	// Status is its progress and outcome.
	Status PromotionStatus `json:"status,omitempty"`
}

// PromotionList is a list of Promotions.
//
// +kubebuilder:object:root=true
type PromotionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Promotions.
	Items []Promotion `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Promotion{}, &PromotionList{})
}
