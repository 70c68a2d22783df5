package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InterventionAction is what an Intervention asks of a running promotion.
//
// +kubebuilder:validation:Enum=Halt;Resume;Abort
type InterventionAction string

const (
	// Halt stops a rollout: the promotion pins no more Stacks, and those
	// it pinned finish.
	Halt InterventionAction = "Halt"
	// Resume goes on with a halted rollout. A rollout whose failure budget
	// is still spent halts again at once, saying so.
	Resume InterventionAction = "Resume"
	// Abort ends a promotion that runs: it pins no more Stacks, waits for
	// those updating to finish, and ends Aborted, naming the release each
	// Stack runs.
	Abort InterventionAction = "Abort"
)

// InterventionSpec asks one running promotion to halt, resume or abort.
// It never changes.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="an Intervention is a record: its spec cannot change"
type InterventionSpec struct {
	// Promotion is the Promotion, in the same namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Promotion string `json:"promotion"`

	// Stage is the promotion's stage: the verb "operate" on it is what
	// the API server checks (config/policy), and a promotion into another
	// stage ignores the Intervention.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Stage string `json:"stage"`

	// Action is Halt, Resume or Abort.
	Action InterventionAction `json:"action"`

	// User is who asks: the user name the API server authenticated (the
	// admission policy in config/policy refuses any other value; the
	// stackyard CLI sets it).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	User string `json:"user"`

	// Reason says why, in the user's words.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
}

// Intervention is a person's halt, resume or abort of a promotion that
// runs, kept as the record of it. The promotion acts on its
// Interventions in the order the API server created them and lists them
// in status.rollout.interventions.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=syint,categories=stackyard
// +kubebuilder:printcolumn:name="Promotion",type=string,JSONPath=`.spec.promotion`
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.action`
// +kubebuilder:printcolumn:name="User",type=string,JSONPath=`.spec.user`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Intervention struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec InterventionSpec `json:"spec"`
}

// InterventionList is a list of Interventions.
//
// +kubebuilder:object:root=true
type InterventionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Intervention `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Intervention{}, &InterventionList{})
}
