package v1alpha1

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AvailabilityStrategy says, for a stage fed by several upstream stages,
// how many of them must have verified a release before it is available.
//
// +kubebuilder:validation:Enum=All;OneOf
type AvailabilityStrategy string

const (
	// OneOf: verified in any one upstream stage (Kargo's default).
	OneOf AvailabilityStrategy = "OneOf"
	// All: verified in every upstream stage.
	All AvailabilityStrategy = "All"
)

// SelectionPolicy says which available release auto-promotion picks.
//
// +kubebuilder:validation:Enum=NewestRelease;MatchUpstream
type SelectionPolicy string

const (
	// NewestRelease picks the newest available release.
	NewestRelease SelectionPolicy = "NewestRelease"
	// MatchUpstream picks the release the (single) upstream stage runs now.
	MatchUpstream SelectionPolicy = "MatchUpstream"
)

// StackBinding names a Stack, in the stage's namespace, that the stage
// deploys: a promotion pins its spec.commit to the release's commit.
type StackBinding struct {
	// Name is the Stack's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
}

// ReleaseSources says where a stage takes its releases from.
//
// +kubebuilder:validation:XValidation:rule="self.direct || (has(self.stages) && size(self.stages) > 0)",message="spec.sources: set direct, or list upstream stages"
type ReleaseSources struct {
	// Direct takes releases straight from the pipeline, as they are
	// discovered.
	// +optional
	Direct bool `json:"direct,omitempty"`

	// Stages takes releases once they are verified in these upstream
	// stages of the same pipeline.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	Stages []string `json:"stages,omitempty"`

	// AvailabilityStrategy, with several upstream stages: All of them or
	// OneOf them must have verified a release; default OneOf.
	// +optional
	// +kubebuilder:default=OneOf
	AvailabilityStrategy AvailabilityStrategy `json:"availabilityStrategy,omitempty"`

	// RequiredSoakTime is how long a release must have been verified
	// upstream (in every upstream stage that counts) before it is
	// available here, timed from the verifications recorded on the
	// Release.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^-?(0|([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+)$`
	RequiredSoakTime *metav1.Duration `json:"requiredSoakTime,omitempty"`
}

// AutoPromotionOptions govern automatic promotion into a stage. Changing
// them requires the "govern" verb on the stage (see config/policy).
type AutoPromotionOptions struct {
	// Enabled promotes each newly available release without a person
	// asking. A release that failed in this stage is never promoted
	// automatically again.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// SelectionPolicy picks the release; default NewestRelease.
	// NewestRelease picks the newest available release (by commit time)
	// that is newer than every release verified in the stage, so a
	// rollback stays until a newer release arrives. MatchUpstream follows
	// the release the single upstream stage runs, rollbacks included.
	// +optional
	// +kubebuilder:default=NewestRelease
	SelectionPolicy SelectionPolicy `json:"selectionPolicy,omitempty"`
}

// WindowKind says whether a promotion window allows or denies.
//
// +kubebuilder:validation:Enum=Allow;Deny
type WindowKind string

const (
	// Allow: promotions may start only inside an Allow window (when the
	// stage has any).
	Allow WindowKind = "Allow"
	// Deny: no promotion starts inside a Deny window.
	Deny WindowKind = "Deny"
)

// PromotionWindow is a recurring time window, as in an iCalendar event
// (RFC 5545): the first occurrence runs from dtstart to dtend, and rrule
// repeats it. Every occurrence starts at dtstart's time of day in UTC, on a
// day the rule selects, from dtstart's day on (dtstart itself counts only
// when the rule selects its day), and lasts dtend - dtstart. A rule the
// operator cannot read stalls the Stage, naming the window.
//
// +kubebuilder:validation:XValidation:rule="self.dtend > self.dtstart",message="dtend must be after dtstart",fieldPath=".dtend"
type PromotionWindow struct {
	// Kind is Allow or Deny.
	Kind WindowKind `json:"kind"`

	// RRule repeats the window, e.g. "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH". The
	// supported parts are FREQ (DAILY, WEEKLY), INTERVAL, BYDAY (weekday
	// codes MO to SU, without numbers) and UNTIL (a UTC date-time such as
	// 20261231T235959Z, or a date, meaning the end of that day). Empty: the
	// window occurs once.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	RRule string `json:"rrule,omitempty"`

	// DTStart is the start of the first occurrence.
	DTStart metav1.Time `json:"dtstart"`

	// DTEnd is the end of the first occurrence; each occurrence lasts
	// dtend - dtstart.
	DTEnd metav1.Time `json:"dtend"`
}

// Freeze stops every promotion into a stage, by hand or automatic, until
// it is removed. Setting it requires the "govern" verb on the stage.
type Freeze struct {
	// Reason says why, for the people who would promote.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason"`
}

// StageSpec is an environment: the Stacks it deploys and where its
// releases come from.
//
// +kubebuilder:validation:XValidation:rule="!has(self.autoPromotionOptions) || !has(self.autoPromotionOptions.selectionPolicy) || self.autoPromotionOptions.selectionPolicy != 'MatchUpstream' || (has(self.sources.stages) && size(self.sources.stages) == 1)",message="spec.autoPromotionOptions.selectionPolicy MatchUpstream needs exactly one stage in spec.sources.stages",fieldPath=".autoPromotionOptions.selectionPolicy"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.rollout.verifyEachWave) || !self.rollout.verifyEachWave || (has(self.verification) && has(self.verification.checks) && size(self.verification.checks) > 0)",message="spec.rollout.verifyEachWave needs checks in spec.verification.checks",fieldPath=".rollout.verifyEachWave"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.rollout.approveEachWave) || !self.rollout.approveEachWave || has(self.approval)",message="spec.rollout.approveEachWave needs spec.approval",fieldPath=".rollout.approveEachWave"
// +kubebuilder:validation:XValidation:rule="(has(self.stacks) && size(self.stacks) > 0) || has(self.stackSelector)",message="spec: name the stage's Stacks in spec.stacks, or select them with spec.stackSelector"
type StageSpec struct {
	// Pipeline is the Pipeline, in the same namespace, whose releases the
	// stage promotes. It cannot change.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.pipeline cannot change"
	Pipeline string `json:"pipeline"`

	// Stacks are the Stacks the stage deploys, by name. A Stack belongs to
	// the one stage its annotation promotion.stackyard.dev/authorized-stage
	// names, which a governor sets: a promotion of any other stage that
	// lists it is Aborted, naming the Stack. Each Stack must deploy from git
	// with spec.commit (not spec.branch): a promotion pins that field.
	// Name the Stacks here, select them with stackSelector, or both.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Stacks []StackBinding `json:"stacks,omitempty"`

	// StackSelector selects, by their labels, more Stacks of the stage's
	// namespace for the stage to deploy: a fleet of Stacks of one program,
	// one per region or tenant, without naming each. Labels are anyone's
	// to write who may edit a Stack, so a selector only narrows: a Stack it
	// matches is deployed only if its promotion.stackyard.dev/authorized-
	// stage annotation names this stage (its consent, which only a
	// governor gives; for a preview-only stage, its preview-stages
	// annotation); one that does not is left alone and listed in
	// status.unconsentedStacks. A Stack bound to this stage that the
	// selector does not match (its label removed) makes the stage wait,
	// naming it, and its promotions are refused until it matches again or
	// its binding is removed. An empty selector ({}) matches every Stack
	// of the namespace. A stage deploys at most 1,000 Stacks, named and
	// selected together; beyond that it is Stalled.
	// +optional
	StackSelector *metav1.LabelSelector `json:"stackSelector,omitempty"`

	// Sources are where the stage takes releases from.
	Sources ReleaseSources `json:"sources"`

	// AutoPromotionOptions govern automatic promotion; without them,
	// releases are promoted only when a person asks.
	// +optional
	AutoPromotionOptions *AutoPromotionOptions `json:"autoPromotionOptions,omitempty"`

	// PromotionWindows limit when a promotion may start: inside an Allow
	// window (if there is any) and outside every Deny window. A promotion
	// asked for outside them waits.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	PromotionWindows []PromotionWindow `json:"promotionWindows,omitempty"`

	// Freeze stops every promotion into the stage while it is set.
	// +optional
	Freeze *Freeze `json:"freeze,omitempty"`

	// PreviewOnly makes the stage a preview stage: a promotion runs
	// `pulumi preview` of each bound Stack at the release's commit,
	// records the changes, and succeeds without changing anything; the
	// release is verified there when every preview succeeded.
	// +optional
	PreviewOnly bool `json:"previewOnly,omitempty"`

	// Approval requires people to approve a promotion, after its preview
	// and before it changes anything. Changing it requires the "govern"
	// verb on the stage.
	// +optional
	Approval *ApprovalPolicy `json:"approval,omitempty"`

	// Policies are rules over what a promotion's previews would change,
	// evaluated once every preview succeeded and before anyone is asked to
	// approve (or, without approvals, before the promotion starts; in a
	// preview-only stage, before it succeeds). A rule that fires either
	// refuses the promotion or requires approvals on top of spec.approval.
	// The results are recorded in the Promotion's status.policies.
	// Changing them requires the "govern" verb on the stage.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Policies []PolicyRule `json:"policies,omitempty"`

	// Verification adds checks that must pass after a promotion's updates
	// before the release counts as verified in the stage (beyond the
	// built-in one: every Stack Ready at the release's commit), and what
	// to do when they fail.
	// +optional
	Verification *Verification `json:"verification,omitempty"`

	// Rollout deploys the stage's Stacks in waves, a few at a time, with a
	// failure budget that halts the rollout when spent. Without it a
	// promotion pins every Stack at once and fails at the first failure.
	// +optional
	Rollout *Rollout `json:"rollout,omitempty"`
}

// Approver names who may approve: a user or a group, as the API server
// authenticates them. One of the two.
//
// +kubebuilder:validation:XValidation:rule="has(self.user) != has(self.group)",message="set one of user and group"
type Approver struct {
	// User is a user name.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	User string `json:"user,omitempty"`
	// Group is a group name; any member may approve.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Group string `json:"group,omitempty"`
}

// ApprovalPolicy says how many people, and who, must approve a promotion
// into a stage. Whoever approves also needs the verb "approve" on the
// stage, checked by the API server (config/policy), so kubectl, the CLI
// and the dashboard are judged alike.
type ApprovalPolicy struct {
	// Required is how many distinct people must approve (N of M).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	Required int32 `json:"required"`

	// From lists who counts (the M); empty means anyone allowed the verb
	// "approve" on the stage. With RequireEach, every entry must be
	// represented by at least one approval (e.g. a functional and a
	// security group), and Required counts on top.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	From []Approver `json:"from,omitempty"`

	// RequireEach requires an approval from each entry of From.
	// +optional
	RequireEach bool `json:"requireEach,omitempty"`

	// AllowSelfApproval lets the user who asked for the promotion approve
	// it too; by default their approval does not count.
	// +optional
	AllowSelfApproval bool `json:"allowSelfApproval,omitempty"`

	// ExpireAfter is how long an approval counts; default: until the
	// promotion ends.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^-?(0|([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+)$`
	ExpireAfter *metav1.Duration `json:"expireAfter,omitempty"`

	// SkipForRollback lets an automatic rollback run without approvals.
	// +optional
	SkipForRollback bool `json:"skipForRollback,omitempty"`
}

// PolicyAction is what a policy rule does when it fires.
//
// +kubebuilder:validation:Enum=Refuse;RequireApproval
type PolicyAction string

const (
	// PolicyRefuse fails the promotion before anything changes.
	PolicyRefuse PolicyAction = "Refuse"
	// PolicyRequireApproval requires the rule's approvals, on top of the
	// stage's.
	PolicyRequireApproval PolicyAction = "RequireApproval"
)

// PolicyRule is a rule, written in CEL, over the changes a promotion's
// previews found. The expression sees these variables, which hold names
// and counts, never a resource's or a configuration's values:
//
//   - changes: a list with one map per resource that would change, in every
//     Stack of the stage: {stack, urn, type, op, properties}, where op is
//     "create", "update", "replace" or "delete" and properties lists the
//     names of the changed properties (a preview lists at most 200
//     resources per Stack);
//   - counts: {create, update, replace, delete, same, total}, summed over
//     the Stacks; total is create + update + replace + delete;
//   - stacks: a list of {name, counts}, one per Stack, counts as above;
//   - release: {name, commit, tag, author, subject, paths, rollback}, where
//     paths are the files the release changes under the Stacks' repoDirs
//     (empty when unknown) and rollback says the promotion is a rollback;
//   - promotion: {name, requestedBy}.
//
// For example, `changes.exists(c, c.op in ['delete', 'replace'] &&
// c.type.matches('^aws:rds/'))` fires when a database would be deleted or
// replaced. The strings extension (e.g. lowerAscii, split) is available.
//
// +kubebuilder:validation:XValidation:rule="self.action == 'RequireApproval' ? has(self.approval) : !has(self.approval)",message="approval: set it with action RequireApproval, and only then",fieldPath=".approval"
type PolicyRule struct {
	// Name names the rule in the promotion's status and messages.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// Description says what the rule is for, for people reading the stage.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// Expression is a CEL expression over the variables above that is true
	// when the rule fires. One that does not compile, does not yield a
	// bool, or exceeds the evaluation's cost limit fails the promotion,
	// naming the rule.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression"`

	// Action is what happens when the rule fires: Refuse fails the
	// promotion before anything changes; RequireApproval requires the
	// approvals of the approval field, on top of spec.approval's.
	Action PolicyAction `json:"action"`

	// Message is shown when the rule fires, in the promotion's status and
	// messages; default: the rule's name.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// Approval is who must approve when a RequireApproval rule fires; set
	// it with that action only.
	// +optional
	Approval *RuleApproval `json:"approval,omitempty"`
}

// RuleApproval is what a fired RequireApproval rule requires, counted on
// the same Approvals as the stage's approval policy and judged alike: an
// approver needs the verb "approve" on the stage, and the requester's own
// approval counts only with spec.approval.allowSelfApproval.
type RuleApproval struct {
	// Required is how many distinct people among From must approve.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	Required int32 `json:"required"`

	// From lists who counts for this rule; empty means anyone allowed the
	// verb "approve" on the stage.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	From []Approver `json:"from,omitempty"`

	// RequireEach requires an approval from each entry of From, with
	// Required counting on top.
	// +optional
	RequireEach bool `json:"requireEach,omitempty"`
}

// Verification is what proves a promotion worked.
type Verification struct {
	// Checks must all pass, after every Stack is Ready at the release's
	// commit.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Checks []VerificationCheck `json:"checks,omitempty"`

	// RollbackOnFailure promotes the last release verified in the stage
	// when verification fails; the rollback is a Promotion like any other
	// (previewed, and approved unless approval.skipForRollback).
	// +optional
	RollbackOnFailure bool `json:"rollbackOnFailure,omitempty"`
}

// VerificationCheck is one check, with the field names of an Argo
// Rollouts AnalysisTemplate metric (web provider), so that templates port
// by copy and paste. Conditions are CEL expressions over `result` (the
// measured value); see docs/change-management.md for how they differ from
// Argo's.
//
// +kubebuilder:validation:XValidation:rule="has(self.http) != has(self.job)",message="set one of http and job"
type VerificationCheck struct {
	// Name names the check.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// InitialDelay waits this long after the updates before the first
	// measurement.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^-?(0|([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+)$`
	InitialDelay *metav1.Duration `json:"initialDelay,omitempty"`

	// Interval is the time between measurements; default 10s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^-?(0|([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+)$`
	Interval *metav1.Duration `json:"interval,omitempty"`

	// Count is how many measurements to take; default 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Count int32 `json:"count,omitempty"`

	// FailureLimit is how many failed measurements are tolerated; default
	// 0. A measurement that could not be taken (Error) counts as failed.
	// +optional
	// +kubebuilder:validation:Minimum=0
	FailureLimit int32 `json:"failureLimit,omitempty"`

	// SuccessCondition is a CEL expression over `result` that is true when
	// a measurement succeeded, e.g. "result.status == 'ok'".
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	SuccessCondition string `json:"successCondition,omitempty"`

	// FailureCondition is a CEL expression over `result` that is true when
	// a measurement failed.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	FailureCondition string `json:"failureCondition,omitempty"`

	// HTTP measures the answer of an HTTP endpoint.
	// +optional
	HTTP *HTTPCheck `json:"http,omitempty"`

	// Job runs a Kubernetes Job, which must complete.
	// +optional
	Job *JobCheck `json:"job,omitempty"`
}

// HTTPCheck is Argo Rollouts' web metric provider.
type HTTPCheck struct {
	// URL is the address to call.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url"`
	// Method is GET (default), POST or PUT.
	// +optional
	// +kubebuilder:validation:Enum=GET;POST;PUT
	Method string `json:"method,omitempty"`
	// Headers are sent with the request.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Headers []HTTPHeader `json:"headers,omitempty"`
	// Body is sent with POST and PUT.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	Body string `json:"body,omitempty"`
	// JSONPath selects the measured value from a JSON answer, e.g.
	// "{$.data.ok}" (the braces may be left out); one match is the value,
	// several a list. Default: the whole answer, or its text when it is
	// not JSON.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	JSONPath string `json:"jsonPath,omitempty"`
	// TimeoutSeconds bounds one request; default 10.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=300
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
	// AllowLinkLocal lets the check reach link-local addresses
	// (169.254.0.0/16, fe80::/10) and the known cloud metadata addresses,
	// which it refuses by default: the operator calls from its own
	// network position, where those answer with its credentials. A check
	// never follows a redirect to another host, whatever this says.
	// +optional
	AllowLinkLocal bool `json:"allowLinkLocal,omitempty"`
}

// HTTPHeader is one request header, given inline or read from a Secret of
// the stage's namespace.
//
// +kubebuilder:validation:XValidation:rule="has(self.value) != has(self.valueFrom)",message="set one of value and valueFrom"
type HTTPHeader struct {
	// Key is the header's name.
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
	// Value is the header's value.
	// +optional
	Value string `json:"value,omitempty"`
	// ValueFrom reads the value from a Secret key.
	// +optional
	ValueFrom *HeaderValueSource `json:"valueFrom,omitempty"`
}

// HeaderValueSource points at a Secret key.
type HeaderValueSource struct {
	// SecretKeyRef selects the key.
	SecretKeyRef corev1.SecretKeySelector `json:"secretKeyRef"`
}

// JobCheck runs a Job that must complete. A measurement is Successful
// when the Job completes and Failed when it fails (its backoffLimit
// retries happen within one measurement); successCondition and
// failureCondition do not apply.
type JobCheck struct {
	// Spec is the Job's spec; the Job is created in the stage's namespace,
	// owned by the Promotion.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Spec batchv1.JobSpec `json:"spec"`
}

// StageHealthStatus sums up the health of a stage's Stacks.
//
// +kubebuilder:validation:Enum=Healthy;Progressing;Degraded;Unknown
type StageHealthStatus string

const (
	// Healthy: every Stack is Ready.
	Healthy StageHealthStatus = "Healthy"
	// Progressing: a Stack is reconciling.
	Progressing StageHealthStatus = "Progressing"
	// Degraded: a Stack is stalled, or missing.
	Degraded StageHealthStatus = "Degraded"
	// Unknown: the Stacks have not been looked at yet.
	Unknown StageHealthStatus = "Unknown"
)

// Reasons of a Stage's Reconciling and Stalled conditions that say what
// is wrong with the Stacks it deploys, as typed facts.
const (
	// StageReasonTooManyStacks: the stage deploys more Stacks than a
	// promotion records (named and selected together); it is Stalled.
	StageReasonTooManyStacks = "TooManyStacks"
	// StageReasonStacksUnselected: a Stack bound to the stage is not
	// selected by it (its label removed), or the stage deploys no Stack;
	// it waits, and stalls if that lasts.
	StageReasonStacksUnselected = "StacksUnselected"
)

// StageHealth is the health of a stage's Stacks.
type StageHealth struct {
	// Status sums the Stacks' conditions up.
	Status StageHealthStatus `json:"status"`
	// Message names the Stack that is not healthy, and why.
	// +optional
	Message string `json:"message,omitempty"`
}

// StageRelease is a release as a stage ran it.
type StageRelease struct {
	// Name is the Release's name.
	Name string `json:"name"`
	// SHA is its commit.
	SHA string `json:"sha"`
	// Subject is its commit's subject.
	// +optional
	Subject string `json:"subject,omitempty"`
	// Since is when the promotion that brought it succeeded.
	Since metav1.Time `json:"since"`
	// Promotion is the Promotion that brought it.
	// +optional
	Promotion string `json:"promotion,omitempty"`
	// Rollback says that the promotion was a rollback.
	// +optional
	Rollback bool `json:"rollback,omitempty"`
}

// StageStatus says what runs in the stage and how it is.
type StageStatus struct {
	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are Ready, Reconciling and Stalled (kstatus).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// CurrentRelease is the release the stage runs now.
	// +optional
	CurrentRelease *StageRelease `json:"currentRelease,omitempty"`

	// Health sums up the Stacks' conditions.
	// +optional
	Health *StageHealth `json:"health,omitempty"`

	// StackCount is how many Stacks the stage deploys: those spec.stacks
	// names and those spec.stackSelector matches that consent to it.
	// +optional
	StackCount int32 `json:"stackCount,omitempty"`

	// UnconsentedStacks names Stacks spec.stackSelector matches that do
	// not consent to this stage (their promotion.stackyard.dev/authorized-
	// stage annotation names no stage, or another): the stage does not
	// deploy them. At most 20 are named, in name order;
	// unconsentedStackCount counts them all.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	UnconsentedStacks []string `json:"unconsentedStacks,omitempty"`

	// UnconsentedStackCount is how many Stacks spec.stackSelector matches
	// that do not consent to this stage.
	// +optional
	UnconsentedStackCount int32 `json:"unconsentedStackCount,omitempty"`

	// WaitingFor says what keeps the next release from being promoted:
	// an upstream verification, a soak time, a window, a freeze, a
	// running promotion, or a person (auto-promotion off); empty when the
	// stage runs the release it would pick.
	// +optional
	WaitingFor string `json:"waitingFor,omitempty"`

	// History lists the releases the stage ran, newest first, at most 20.
	// The Promotions are the full record.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	History []StageRelease `json:"history,omitempty"`
}

// Stage is an environment of a Pipeline: Stacks that run one release at a
// time, fed by the pipeline or by upstream stages.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=systage,categories=stackyard
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Pipeline",type=string,JSONPath=`.spec.pipeline`
// +kubebuilder:printcolumn:name="Release",type=string,JSONPath=`.status.currentRelease.name`
// +kubebuilder:printcolumn:name="Stacks",type=integer,JSONPath=`.status.stackCount`
// +kubebuilder:printcolumn:name="Health",type=string,JSONPath=`.status.health.status`
// +kubebuilder:printcolumn:name="Waiting For",type=string,priority=10,JSONPath=`.status.waitingFor`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(self.spec.sources.stages) || !self.spec.sources.stages.exists(s, s == self.metadata.name)",message="spec.sources.stages: a stage cannot take releases from itself",fieldPath=".spec.sources.stages"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be at most 63 characters: it is a label value on the stage's Promotions"
type Stage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the environment.
	Spec StageSpec `json:"spec"`
	// Status is what runs there.
	Status StageStatus `json:"status,omitempty"`
}

// StageList is a list of Stages.
//
// +kubebuilder:object:root=true
type StageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Stages.
	Items []Stage `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Stage{}, &StageList{})
}
