package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UpdateType is the Pulumi operation an Update runs.
// +kubebuilder:validation:Enum=preview;up;destroy;refresh
type UpdateType string

const (
	// PreviewType runs `pulumi preview`: computes the changes without
	// making them.
	PreviewType UpdateType = "preview"
	// UpType runs `pulumi up`: makes the stack match the program.
	UpType UpdateType = "up"
	// DestroyType runs `pulumi destroy`: deletes every resource of the
	// stack.
	DestroyType UpdateType = "destroy"
	// RefreshType runs `pulumi refresh`: reads the real state of the
	// stack's resources into the stack's state.
	RefreshType UpdateType = "refresh"
)

// UpdateSpec is the desired state of an Update: which operation to run, on
// which stack of which workspace, with which options.
//
// Every field is optional because the type doubles as the spec of an
// UpdateTemplate, which is merged over the Updates a Stack creates; keep it
// free of defaults and required fields.
type UpdateSpec struct {
	// WorkspaceName is the name of the Workspace, in the Update's
	// namespace, that runs the operation.
	// +optional
	WorkspaceName string `json:"workspaceName,omitempty"`

	// StackName is the Pulumi stack to operate on; the workspace must list
	// it in spec.stacks.
	// +optional
	StackName string `json:"stackName,omitempty"`

	// Type is the operation to run: preview, up, destroy or refresh.
	// +optional
	Type UpdateType `json:"type,omitempty"`

	// TtlAfterCompleted is how long a finished Update is kept before it is
	// deleted, as a duration such as "1h" or "30m"; unset keeps it until
	// its owner deletes it.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^-?(0|([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+)$`
	TtlAfterCompleted *metav1.Duration `json:"ttlAfterCompleted,omitempty"` //nolint:revive // the Pulumi Kubernetes Operator's Go name, kept for its users' code

	// Parallel caps how many resource operations run at once (1 for one at
	// a time); unset means no cap.
	// +optional
	Parallel *int32 `json:"parallel,omitempty"`

	// Message is a description recorded with the operation in the stack's
	// history.
	// +optional
	Message *string `json:"message,omitempty"`

	// ExpectNoChanges fails the operation if it would change any resource.
	// +optional
	ExpectNoChanges *bool `json:"expectNoChanges,omitempty"`

	// Replace lists URNs of resources to replace even if they have not
	// changed.
	// +optional
	Replace []string `json:"replace,omitempty"`

	// Target lists the URNs of the only resources to operate on; empty
	// means all.
	// +optional
	Target []string `json:"target,omitempty"`

	// TargetDependents also operates on the resources that depend on the
	// targets.
	// +optional
	TargetDependents *bool `json:"targetDependents,omitempty"`

	// Refresh refreshes the stack's state before the operation.
	// +optional
	Refresh *bool `json:"refresh,omitempty"`

	// ExpectNoRefreshChanges, for an up, first refreshes the state on its
	// own and fails before changing anything when that refresh finds
	// changes (resources changed outside Pulumi). A stackyard extension: it
	// is how a Stack's expectNoRefreshChanges is honoured (the upstream
	// operator accepts the field and ignores it).
	// +optional
	ExpectNoRefreshChanges *bool `json:"expectNoRefreshChanges,omitempty"`

	// ContinueOnError keeps going after a resource fails, doing as much of
	// the operation as it can, instead of stopping at the first error.
	// +optional
	ContinueOnError *bool `json:"continueOnError,omitempty"`

	// Remove deletes the stack itself, with its configuration, once a
	// destroy has deleted all its resources.
	// +optional
	Remove *bool `json:"remove,omitempty"`

	// RunProgram runs the program during a destroy or refresh, for programs
	// whose providers are configured by code (e.g. credentials fetched at
	// run time). Ignored by preview and up, which always run it.
	// +optional
	RunProgram *bool `json:"runProgram,omitempty"`

	// SavePlan, for a preview, saves the update plan the preview computes
	// (`pulumi preview --save-plan`) in an immutable Secret owned by the
	// Update, named in status.plan, under the key "plan". A plan holds the
	// stack's configuration and the planned resources' inputs and outputs:
	// secret values encrypted by the stack's secrets provider, the others
	// in clear text. The same Secret holds, under the key "diff", the
	// preview's value diff: each changed property's old and new value,
	// secrets shown as "[secret]" (the JSON of package
	// internal/valuediff). A stackyard extension; ignored by other types.
	// +optional
	SavePlan *bool `json:"savePlan,omitempty"`

	// PlanSecret, for an up, names a Secret in the Update's namespace whose
	// key "plan" holds an update plan a preview saved (see savePlan): the up
	// is held to it (`pulumi up --plan`), and fails with a message
	// containing "violates plan", before changing the resource concerned,
	// where it would do anything the plan does not allow (an input changed
	// since the preview). A missing Secret or key fails the Update. A
	// stackyard extension; ignored by other types.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PlanSecret string `json:"planSecret,omitempty"`
}

// PlanKey is the key of the update plan in the Secret status.plan and
// spec.planSecret name.
const PlanKey = "plan"

// DiffKey is the key of the preview's value diff in the Secret status.plan
// names.
const DiffKey = "diff"

// UpdateStatus is the observed state of an Update.
type UpdateStatus struct {
	// ObservedGeneration is the metadata.generation that the status
	// describes.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// StartTime is when the operation started.
	// +optional
	StartTime metav1.Time `json:"startTime,omitempty"`

	// EndTime is when the operation finished.
	// +optional
	EndTime metav1.Time `json:"endTime,omitempty"`

	// Permalink is the address of the operation in Pulumi Cloud; empty for
	// self-managed (DIY) backends.
	// +optional
	Permalink string `json:"permalink,omitempty"`

	// Message describes the outcome, e.g. the error that failed the
	// operation.
	// +optional
	Message string `json:"message,omitempty"`

	// Outputs is the name of a Secret, in the Update's namespace, holding
	// the stack outputs after the operation, one key per output with its
	// JSON value.
	// +optional
	Outputs string `json:"outputs,omitempty"`

	// Conditions describe the operation's progress. Known types:
	// Progressing, Complete and Failed.
	// +listType=map
	// +listMapKey=type
	// +patchMergeKey=type
	// +patchStrategy=merge
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// ProjectInfo is the project name and runtime the agent found in
	// Pulumi.yaml during the operation; the Stack controller keeps it so
	// that it can destroy the stack later even without the source.
	// +optional
	ProjectInfo *ProjectInfo `json:"projectInfo,omitempty"`

	// Changes counts the resources per operation kind (create, update,
	// delete, replace, same, ...) the operation made or, for a preview,
	// would make. A stackyard extension.
	// +optional
	Changes map[string]int64 `json:"changes,omitempty"`

	// Plan, for a preview with spec.savePlan, names the immutable Secret,
	// owned by the Update, whose key "plan" holds the saved update plan. A
	// stackyard extension.
	// +optional
	Plan string `json:"plan,omitempty"`

	// ResourceChanges lists, for a preview, each resource the update would
	// change (at most 500): URN, type and operation. A stackyard extension;
	// approvals and verification read it.
	// +optional
	// +kubebuilder:validation:MaxItems=500
	ResourceChanges []ResourceChange `json:"resourceChanges,omitempty"`

	// LogTail is the end of the operation's log, from the engine's events:
	// one line per resource step, failure, diagnostic (what the program and
	// providers printed) and the summary; at most 40 lines of at most 512
	// characters, secret values masked. A stackyard extension.
	// +optional
	// +kubebuilder:validation:MaxItems=40
	// +kubebuilder:validation:items:MaxLength=512
	LogTail []string `json:"logTail,omitempty"`
}

// ResourceChange is one resource a preview would change.
type ResourceChange struct {
	// URN is the resource's Pulumi URN.
	URN string `json:"urn"`
	// Type is the resource's type token (e.g. aws:s3/bucket:Bucket).
	// +optional
	Type string `json:"type,omitempty"`
	// Op is the operation: create, update, delete, replace, ...
	Op string `json:"op"`
	// Properties names the top-level input properties whose change causes
	// the step (the engine's "diffs"): names only, never values, so a
	// secret's value cannot leak through it. A stackyard extension; empty
	// for creates and deletes.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Properties []string `json:"properties,omitempty"`
}

// Update is one Pulumi operation (preview, up, destroy or refresh) on a
// stack, run in a Workspace. It runs once; its status records the result.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories={pulumi,stackyard}
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Workspace",type=string,JSONPath=`.spec.workspaceName`
// +kubebuilder:printcolumn:name="Type",type=string,priority=10,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Start Time",type=date,priority=10,JSONPath=`.status.startTime`
// +kubebuilder:printcolumn:name="End Time",type=date,priority=10,JSONPath=`.status.endTime`
// +kubebuilder:printcolumn:name="Progressing",type=string,JSONPath=`.status.conditions[?(@.type=="Progressing")].status`
// +kubebuilder:printcolumn:name="Failed",type=string,JSONPath=`.status.conditions[?(@.type=="Failed")].status`
// +kubebuilder:printcolumn:name="Complete",type=string,JSONPath=`.status.conditions[?(@.type=="Complete")].status`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.permalink`
type Update struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the operation to run.
	Spec UpdateSpec `json:"spec,omitempty"`
	// Status is the progress and outcome of the operation.
	Status UpdateStatus `json:"status,omitempty"`
}

// UpdateList is a list of Updates.
//
// +kubebuilder:object:root=true
type UpdateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Updates.
	Items []Update `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Update{}, &UpdateList{})
}
