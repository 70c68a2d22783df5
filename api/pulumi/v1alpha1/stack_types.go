package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// Stack is the deprecated pulumi.com/v1alpha1 version of pulumi.com/v1 Stack,
// with the same schema; objects are stored as v1 and converted by the API
// server without change. Use pulumi.com/v1.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories={pulumi,stackyard}
// +kubebuilder:subresource:status
// +kubebuilder:deprecatedversion:warning="pulumi.com/v1alpha1 Stack is deprecated; use pulumi.com/v1 Stack, which has the same schema"
// +kubebuilder:printcolumn:name="Stack",type=string,priority=10,JSONPath=`.spec.stack`
// +kubebuilder:printcolumn:name="Last Update",type=string,JSONPath=`.status.lastUpdate.state`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.status.lastUpdate.lastResyncTime`
// +kubebuilder:printcolumn:name="Last Commit",type=string,priority=10,JSONPath=`.status.lastUpdate.lastAttemptedCommit`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reconciling",type=string,JSONPath=`.status.conditions[?(@.type=="Reconciling")].reason`
// +kubebuilder:printcolumn:name="Stalled",type=string,JSONPath=`.status.conditions[?(@.type=="Stalled")].reason`
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
	Status pulumiv1.StackStatus `json:"status,omitempty"`
}

// StackList is a list of v1alpha1 Stacks.
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
