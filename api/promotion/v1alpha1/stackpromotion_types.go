package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StackPromotion is one Stack's part of a Promotion: what the promotion
// previewed on the Stack. The operator makes one per Stack it previews,
// controlled by the Promotion (an owner reference with its UID), and
// nobody else may create, change or delete one (the admission policy
// stackyard-records). Kubernetes deletes them with their Promotion.
//
// They keep a promotion's per-Stack detail out of the Promotion, so that
// a promotion into a stage of a thousand Stacks stays within the API
// server's size limit: list them by the field promotion, a page at a
// time (`kubectl get stackpromotions --field-selector promotion=<name>`).
// `stackyard review` and the dashboard read them.
//
// Whatever an object of this kind says, the operator acts on it only when
// it is controlled by the UID of the Promotion it names: a record, not a
// claim.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName={systackpromo},categories=stackyard
// +kubebuilder:printcolumn:name="Promotion",type=string,JSONPath=`.promotion`
// +kubebuilder:printcolumn:name="Stack",type=string,JSONPath=`.stack`
// +kubebuilder:printcolumn:name="Preview",type=string,JSONPath=`.preview.message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:selectablefield:JSONPath=`.promotion`
type StackPromotion struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Promotion is the Promotion's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Promotion string `json:"promotion"`

	// Stack is the Stack's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Stack string `json:"stack"`

	// Preview is the promotion's preview of the Stack: its Update, the
	// plan it saved, what it would change, and the code it brings.
	// +optional
	Preview *StackPreview `json:"preview,omitempty"`
}

// StackPromotionList is a list of StackPromotions.
//
// +kubebuilder:object:root=true
type StackPromotionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the StackPromotions.
	Items []StackPromotion `json:"items"`
}

func init() {
	SchemeBuilder.Register(&StackPromotion{}, &StackPromotionList{})
}

// StackLabel names, on the Workspaces, Updates and plan Secrets a
// promotion makes to preview a Stack, the Stack. Like every label, it is
// a claim: the choke point finds the Stack's record by it and then checks
// the record's controller.
const StackLabel = "promotion.stackyard.dev/stack"
