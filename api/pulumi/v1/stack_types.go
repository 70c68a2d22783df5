package v1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
)

// ReconcileRequestAnnotation is the annotation that asks for a Stack to be
// processed again without a spec change; see shared.ReconcileRequestAnnotation.
const ReconcileRequestAnnotation = shared.ReconcileRequestAnnotation

// MaxStackNameLength is the longest Stack name accepted. Object names derived
// from it (the workspace's StatefulSet and its pods, whose names also become
// label values) must stay within Kubernetes' 63-character limit.
const MaxStackNameLength = 42

// StackStatus is the observed state of a Stack.
type StackStatus struct {
	// ObservedGeneration is the metadata.generation the operator last
	// finished processing (successfully or with a stall).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// ObservedReconcileRequest is the value of the
	// pulumi.com/reconciliation-request annotation the operator last
	// finished processing.
	// +optional
	ObservedReconcileRequest string `json:"observedReconcileRequest,omitempty"`

	// Conditions describe the stack's state, following the kstatus
	// convention: Ready is the summary; Reconciling=True while an update is
	// pending or running; Stalled=True when the stack cannot progress until
	// its spec or its source changes.
	// +listType=map
	// +listMapKey=type
	// +patchMergeKey=type
	// +patchStrategy=merge
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// LastUpdate records the last Update run for the stack and its outcome.
	// +optional
	LastUpdate *shared.StackUpdateState `json:"lastUpdate,omitempty"`

	// CurrentUpdate records the Update running now, if any.
	// +optional
	CurrentUpdate *shared.CurrentStackUpdate `json:"currentUpdate,omitempty"`

	// Workspace records the Workspace the operator made for the Stack: its
	// name and the UID the API server gave it. The operator starts the
	// Stack's agent and runs its operations only in that Workspace; one
	// under its name with another UID, or one the Stack has no record of,
	// is not the Stack's, whatever it claims.
	// +optional
	Workspace *shared.ObjectRecord `json:"workspace,omitempty"`

	// Outputs are the stack outputs after the last successful update. Outputs
	// that Pulumi marks secret are not shown in clear.
	// +optional
	Outputs shared.StackOutputs `json:"outputs,omitempty"`

	// ProjectInfo is the project name and runtime reported by the last
	// successful operation, kept so that the stack can be destroyed even if
	// its source is no longer available.
	// +optional
	ProjectInfo *shared.ProjectInfo `json:"projectInfo,omitempty"`

	// History lists the stack's most recent finished operations, newest
	// first, at most MaxHistory of them: what ran, on which commit and
	// generation, when, with what result and which changes. A stackyard
	// extension (the upstream operator keeps only lastUpdate); promotion,
	// verification, the audit trail and the dashboard read it.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	History []shared.UpdateRecord `json:"history,omitempty"`

	// LastDriftCheck is the result of the last drift check
	// (spec.driftDetection). A stackyard extension.
	// +optional
	LastDriftCheck *shared.DriftCheck `json:"lastDriftCheck,omitempty"`

	// ApprovedSpec records the spec, apart from spec.commit, that the
	// operator may deploy: any spec of an ungoverned Stack, and for a
	// Stack a stage governs, the one it was created or bound with, or one
	// a promotion previewed and approved. A stackyard extension.
	// +optional
	ApprovedSpec *shared.SpecApproval `json:"approvedSpec,omitempty"`

	// ExpiresAt is when the Stack's spec.ttl runs out (its creation plus
	// the TTL): the operator then destroys the stack's resources and
	// deletes the Stack. Unset without a TTL. A stackyard extension.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// HeldSpec is set while a governed Stack's spec differs from
	// approvedSpec: the change waits for a promotion of its stage, and the
	// Stack keeps what it deployed (the ChangePending condition says so).
	// A stackyard extension.
	// +optional
	HeldSpec *shared.HeldSpec `json:"heldSpec,omitempty"`
}

// ExpiresAt is when the Stack's spec.ttl runs out: its creation (the API
// server's metadata.creationTimestamp) plus the TTL; zero without a TTL.
func (s *Stack) ExpiresAt() time.Time {
	if s.Spec.TTL == nil || s.CreationTimestamp.IsZero() {
		return time.Time{}
	}
	return s.CreationTimestamp.Add(s.Spec.TTL.Duration)
}

// DeletedExpired reports whether the Stack was deleted once its TTL had
// run out, by the API server's deletion timestamp.
func (s *Stack) DeletedExpired() bool {
	at := s.ExpiresAt()
	return !at.IsZero() && s.DeletionTimestamp != nil && !s.DeletionTimestamp.Time.Before(at)
}

// MaxHistory is how many entries status.history keeps.
const MaxHistory = 10

// Stack is a Pulumi stack that the operator keeps deployed: it fetches the
// program from git, a Flux source or a Program object, runs `pulumi up` in a
// Workspace whenever the program or the spec changes (and periodically if
// asked), and can destroy the stack's resources when the object is deleted.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories={pulumi,stackyard}
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Stack",type=string,priority=10,JSONPath=`.spec.stack`
// +kubebuilder:printcolumn:name="Last Update",type=string,JSONPath=`.status.lastUpdate.state`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.status.lastUpdate.lastResyncTime`
// +kubebuilder:printcolumn:name="Last Commit",type=string,priority=10,JSONPath=`.status.lastUpdate.lastAttemptedCommit`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reconciling",type=string,JSONPath=`.status.conditions[?(@.type=="Reconciling")].reason`
// +kubebuilder:printcolumn:name="Stalled",type=string,JSONPath=`.status.conditions[?(@.type=="Stalled")].reason`
// +kubebuilder:printcolumn:name="Expires",type=string,priority=10,JSONPath=`.status.expiresAt`
// +kubebuilder:printcolumn:name="Permalink",type=string,JSONPath=`.status.lastUpdate.permalink`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 42",message="metadata.name must be at most 42 characters, so that the names derived from it fit in 63"
// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.prerequisites) || self.spec.prerequisites.all(p, p.name != self.metadata.name)",message="spec.prerequisites: a Stack cannot be its own prerequisite; it would wait for itself",fieldPath=".spec.prerequisites"
type Stack struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired stack: its name, program source, configuration
	// and how it is kept up to date.
	Spec shared.StackSpec `json:"spec,omitempty"`
	// Status is the observed state of the stack.
	Status StackStatus `json:"status,omitempty"`
}

// StackList is a list of Stacks.
//
// +kubebuilder:object:root=true
type StackList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Stacks.
	Items []Stack `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Stack{}, &StackList{})
}

// FailureNotCounted reports whether an update of the Stack that failed for
// reason (its Failed condition's) is left out of the failures in a row
// that stall the Stack, and run again: an interruption, and an update
// conflict while spec.retryOnUpdateConflict asks to retry those (without
// it a conflict stalls at once). A promotion waits through such a failure.
func (s *Stack) FailureNotCounted(reason string) bool {
	return reason == autov1alpha1.UpdateReasonInterrupted ||
		(reason == autov1alpha1.UpdateReasonConflict && s.Spec.RetryOnUpdateConflict)
}
