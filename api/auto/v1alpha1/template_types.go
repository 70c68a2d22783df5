package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// WorkspaceTemplate is a partial Workspace that a Stack merges, as a strategic
// merge patch, over the Workspace it generates. Only what is set is merged,
// so every field is optional and none has a default (a default would
// silently override what the Stack asked for).
type WorkspaceTemplate struct {
	// Metadata holds labels and annotations added to the Workspace.
	// +optional
	Metadata *EmbeddedObjectMeta `json:"metadata,omitempty"`

	// Spec is merged over the generated Workspace's spec.
	// +optional
	Spec *WorkspaceSpecTemplate `json:"spec,omitempty"`
}

// WorkspaceSpecTemplate mirrors WorkspaceSpec field for field, with the same
// JSON names, but with every field optional and without defaults, so that a
// template says only what it overrides.
type WorkspaceSpecTemplate struct {
	// ServiceAccountName overrides the service account of the workspace pod.
	// +optional
	ServiceAccountName *string `json:"serviceAccountName,omitempty"`

	// SecurityProfile overrides the security profile: "restricted" or
	// "baseline".
	// +optional
	SecurityProfile *SecurityProfile `json:"securityProfile,omitempty"`

	// Image overrides the workspace image, which provides the `pulumi` CLI
	// and the program's language runtime.
	// +optional
	Image *string `json:"image,omitempty"`

	// ImagePullPolicy overrides the image pull policy: Always, Never or
	// IfNotPresent.
	// +kubebuilder:validation:Enum=Always;Never;IfNotPresent
	// +optional
	ImagePullPolicy *corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// Git is merged over the workspace's git source.
	// +optional
	Git *GitSource `json:"git,omitempty"`

	// Flux is merged over the workspace's Flux source.
	// +optional
	Flux *FluxSource `json:"flux,omitempty"`

	// Local sets a program directory inside the image.
	// +optional
	Local *LocalSource `json:"local,omitempty"`

	// ProjectInfo sets the project name and runtime to start from when no
	// program is fetched.
	// +optional
	ProjectInfo *ProjectInfo `json:"projectInfo,omitempty"`

	// EnvFrom replaces the list of ConfigMaps and Secrets whose keys become
	// environment variables.
	// +listType=atomic
	// +optional
	EnvFrom []corev1.EnvFromSource `json:"envFrom,omitempty"`

	// Env adds environment variables, or replaces those of the same name.
	// +listType=map
	// +listMapKey=name
	// +patchMergeKey=name
	// +patchStrategy=merge
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty" patchStrategy:"merge" patchMergeKey:"name"`

	// Resources overrides the compute requests and limits of the workspace
	// container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// PodTemplate is merged over the workspace's pod template, e.g. to add
	// volumes, node selectors, tolerations or sidecars, or to change the
	// container named "pulumi".
	// +optional
	PodTemplate *PodTemplateOverlay `json:"podTemplate,omitempty"`

	// ServiceTemplate adds labels and annotations to the workspace Service.
	// +optional
	ServiceTemplate *ServiceTemplate `json:"serviceTemplate,omitempty"`

	// PulumiLogLevel overrides the verbosity of the Pulumi CLI's logs (0
	// turns verbose logging off).
	// +optional
	PulumiLogLevel *uint32 `json:"pulumiLogLevel,omitempty"`

	// SkipInstall overrides whether `pulumi install` is skipped.
	// +optional
	SkipInstall *bool `json:"skipInstall,omitempty"`

	// Stacks is merged, by stack name, over the workspace's stacks; config
	// items are merged by key.
	// +listType=map
	// +listMapKey=name
	// +patchMergeKey=name
	// +patchStrategy=merge
	// +optional
	Stacks []WorkspaceStack `json:"stacks,omitempty" patchStrategy:"merge" patchMergeKey:"name"`
}

// PodTemplateOverlay is the pod-template part of a WorkspaceTemplate.
//
// The pod spec is kept as free-form JSON rather than a typed PodSpec: a typed
// PodSpec would demand fields a partial template leaves out (containers) and
// would write them back as null, which a strategic merge patch reads as
// "delete". It is validated when the merged Workspace is created.
type PodTemplateOverlay struct {
	// Metadata holds labels and annotations added to the workspace pod.
	// +optional
	Metadata *EmbeddedObjectMeta `json:"metadata,omitempty"`

	// Spec is a partial pod spec merged over the generated one. Lists of
	// containers, init containers, volumes and the like are merged by name,
	// as kubectl does; the workspace container is named "pulumi".
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Spec *apiextensionsv1.JSON `json:"spec,omitempty"`
}

// UpdateTemplate is a partial Update that a Stack merges, as a strategic
// merge patch, over each Update it creates, e.g. to label them or to set how
// long finished Updates are kept (spec.ttlAfterCompleted).
type UpdateTemplate struct {
	// Metadata holds labels and annotations added to the Update.
	// +optional
	Metadata *EmbeddedObjectMeta `json:"metadata,omitempty"`

	// Spec is merged over the generated Update's spec.
	// +optional
	Spec *UpdateSpec `json:"spec,omitempty"`
}
