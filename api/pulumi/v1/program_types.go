package v1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProgramSpec is a Pulumi YAML program: the sections of a Pulumi.yaml that
// describe what to deploy. Values written as JSON here are Pulumi YAML
// expressions, e.g. "${bucket.id}" or {"fn::stringAsset": "..."}.
type ProgramSpec struct {
	// Configuration declares the configuration inputs of the program, keyed
	// by name; give each a type or a default.
	// +optional
	Configuration map[string]Configuration `json:"configuration,omitempty"`

	// Resources declares the resources the program manages, keyed by
	// logical name.
	// +optional
	Resources map[string]Resource `json:"resources,omitempty"`

	// Variables declares named intermediate values, each an expression that
	// resources and outputs can refer to.
	// +optional
	Variables map[string]apiextensionsv1.JSON `json:"variables,omitempty"`

	// Outputs declares the stack outputs, each an expression over the
	// resources and variables.
	// +optional
	Outputs map[string]apiextensionsv1.JSON `json:"outputs,omitempty"`

	// Packages declares the Pulumi packages the program uses that cannot be
	// found from the resource types alone, e.g. parameterized providers or
	// components from a git repository, keyed by package name; each value
	// is a package source such as "github.com/org/repo@v1.2.3".
	// +optional
	Packages map[string]string `json:"packages,omitempty"`
}

// ConfigType is the data type of a program configuration input.
// +kubebuilder:validation:Enum=String;Number;List<Number>;List<String>
type ConfigType string

// Configuration declares one configuration input of a program.
type Configuration struct {
	// Type is the input's data type: String, Number, List<Number> or
	// List<String>.
	// +optional
	Type ConfigType `json:"type,omitempty"`

	// Default is the value used when the stack does not set the input; it
	// must be of the declared type.
	// +optional
	Default *apiextensionsv1.JSON `json:"default,omitempty"`
}

// Resource declares one resource of a program.
type Resource struct {
	// Type is the resource's Pulumi type token, e.g. "aws:s3:BucketV2" or
	// "kubernetes:core/v1:ConfigMap".
	// +kubebuilder:validation:MinLength=1
	Type string `json:"type"`

	// Properties are the resource's input properties, each an expression.
	// +optional
	Properties map[string]apiextensionsv1.JSON `json:"properties,omitempty"`

	// Options are Pulumi resource options.
	// +optional
	Options *Options `json:"options,omitempty"`

	// Get reads an existing resource instead of managing one; do not set
	// properties with it.
	// +optional
	Get *Getter `json:"get,omitempty"`
}

// Options are the Pulumi resource options of a program resource.
type Options struct {
	// AdditionalSecretOutputs lists output properties to treat as secrets.
	// +optional
	AdditionalSecretOutputs []string `json:"additionalSecretOutputs,omitempty"`

	// Aliases lists former names of the resource, so that a rename does not
	// replace it.
	// +optional
	Aliases []string `json:"aliases,omitempty"`

	// CustomTimeouts overrides how long create, update and delete may take.
	// +optional
	CustomTimeouts *CustomTimeouts `json:"customTimeouts,omitempty"`

	// DeleteBeforeReplace deletes the old resource before creating its
	// replacement, instead of after.
	// +optional
	DeleteBeforeReplace bool `json:"deleteBeforeReplace,omitempty"`

	// DependsOn lists resources, as expressions, that this one depends on
	// beyond those its properties refer to.
	// +optional
	DependsOn []apiextensionsv1.JSON `json:"dependsOn,omitempty"`

	// IgnoreChanges lists properties whose changes are ignored when
	// comparing with the current state.
	// +optional
	IgnoreChanges []string `json:"ignoreChanges,omitempty"`

	// Import is the ID of an existing cloud resource to adopt.
	// +optional
	Import string `json:"import,omitempty"`

	// Parent is the resource, as an expression, to nest this one under.
	// +optional
	Parent *apiextensionsv1.JSON `json:"parent,omitempty"`

	// Protect refuses to delete the resource.
	// +optional
	Protect bool `json:"protect,omitempty"`

	// Provider is the provider resource, as an expression, that manages
	// this resource.
	// +optional
	Provider *apiextensionsv1.JSON `json:"provider,omitempty"`

	// Providers maps package names to provider resources, as expressions,
	// for this resource and its children.
	// +optional
	Providers map[string]apiextensionsv1.JSON `json:"providers,omitempty"`

	// Version is the version of the provider plugin to use.
	// +optional
	Version string `json:"version,omitempty"`
}

// CustomTimeouts overrides how long resource operations may take; each is a
// duration such as "5m".
type CustomTimeouts struct {
	// Create is the timeout of create operations.
	// +optional
	Create string `json:"create,omitempty"`

	// Delete is the timeout of delete operations.
	// +optional
	Delete string `json:"delete,omitempty"`

	// Update is the timeout of update operations.
	// +optional
	Update string `json:"update,omitempty"`
}

// Getter reads an existing resource by ID.
type Getter struct {
	// ID is the provider ID of the resource to read.
	// +kubebuilder:validation:MinLength=1
	ID string `json:"id"`

	// State holds known properties of the resource, as expressions, to
	// help the provider find it.
	// +optional
	State map[string]apiextensionsv1.JSON `json:"state,omitempty"`
}

// ProgramStatus is the observed state of a Program.
type ProgramStatus struct {
	// ObservedGeneration is the metadata.generation the artifact was built
	// from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Artifact is the packaged project (Pulumi.yaml) built from the latest
	// generation, which workspaces download.
	// +optional
	Artifact *Artifact `json:"artifact,omitempty"`

	// Conditions say whether the latest generation is packaged (Ready), is
	// being packaged (Reconciling) or cannot be until the program is fixed
	// (Stalled, with a message naming the field). A stackyard extension.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Program is a Pulumi YAML program written as a Kubernetes object, for Stacks
// to deploy through spec.programRef. The program sits in the top-level
// `program` field, not under a spec.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories={pulumi,stackyard}
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Revision",type=string,priority=10,JSONPath=`.status.artifact.revision`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.artifact.url`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
type Program struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Program is the Pulumi YAML program.
	Program ProgramSpec `json:"program,omitempty"`
	// Status is the observed state of the Program.
	Status ProgramStatus `json:"status,omitempty"`
}

// ProgramList is a list of Programs.
//
// +kubebuilder:object:root=true
type ProgramList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Programs.
	Items []Program `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Program{}, &ProgramList{})
}
