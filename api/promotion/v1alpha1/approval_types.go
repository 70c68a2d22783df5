package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ApprovalDecision is Approve or Reject.
//
// +kubebuilder:validation:Enum=Approve;Reject
type ApprovalDecision string

const (
	// Approve lets the promotion go ahead (once enough have).
	Approve ApprovalDecision = "Approve"
	// Reject fails the promotion, when an eligible approver gives it.
	Reject ApprovalDecision = "Reject"
)

// PromotionLabel names, on an Approval, the Promotion it decides on.
const PromotionLabel = "promotion.stackyard.dev/promotion"

// ApprovalSpec is one person's decision on one promotion. It never
// changes. The admission policy in config/policy requires user and groups
// to be those the API server authenticated the creator as, and the verb
// "approve" on the stage: nobody can forge an approval or approve without
// the right.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="an Approval is a record: it cannot change"
// +kubebuilder:validation:XValidation:rule="self.decision != 'Reject' || (has(self.comment) && size(self.comment) > 0)",message="spec.comment: a rejection needs a reason"
type ApprovalSpec struct {
	// Promotion is the Promotion decided on, in the same namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Promotion string `json:"promotion"`

	// Stage is the promotion's stage: the approve right is checked on it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Stage string `json:"stage"`

	// PlanDigest is the promotion's status.planDigest that was reviewed:
	// the approval counts only while the promotion would apply exactly
	// that.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	PlanDigest string `json:"planDigest"`

	// Wave is the wave of the promotion's rollout decided on, for a stage
	// whose rollout asks for approval before each wave
	// (rollout.approveEachWave). Unset: the promotion itself, which is
	// its first wave.
	// +optional
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=7
	Wave int32 `json:"wave,omitempty"`

	// Decision is Approve or Reject.
	Decision ApprovalDecision `json:"decision"`

	// User is who decides.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	User string `json:"user"`

	// Groups are the user's groups.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Groups []string `json:"groups,omitempty"`

	// Comment says why; required to reject.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Comment string `json:"comment,omitempty"`
}

// Approval is one person's decision, approve or reject, on one promotion
// into a stage that requires approvals. It is immutable: the record of who
// decided what and when. spec.promotion is a selectable field (`kubectl
// get approvals --field-selector spec.promotion=NAME`).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=syapproval,categories=stackyard
// +kubebuilder:printcolumn:name="Promotion",type=string,JSONPath=`.spec.promotion`
// +kubebuilder:printcolumn:name="Decision",type=string,JSONPath=`.spec.decision`
// +kubebuilder:printcolumn:name="User",type=string,JSONPath=`.spec.user`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:selectablefield:JSONPath=`.spec.promotion`
type Approval struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the decision.
	Spec ApprovalSpec `json:"spec"`
}

// ApprovalList is a list of Approvals.
//
// +kubebuilder:object:root=true
type ApprovalList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Approvals.
	Items []Approval `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Approval{}, &ApprovalList{})
}
