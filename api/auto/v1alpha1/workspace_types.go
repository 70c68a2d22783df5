package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SecurityProfile names the Pod Security Standards level a workspace pod is
// built to satisfy; it decides the pod's user and security context and the
// default image.
// +kubebuilder:validation:Enum=baseline;restricted
type SecurityProfile string

const (
	// SecurityProfileBaseline runs the workspace as root, within the Baseline
	// Pod Security Standard. Use it with images that need root, e.g. to
	// install packages at run time.
	SecurityProfileBaseline SecurityProfile = "baseline"
	// SecurityProfileRestricted runs the workspace as a non-root user with a
	// locked-down security context, within the Restricted Pod Security
	// Standard. It is the default.
	SecurityProfileRestricted SecurityProfile = "restricted"
)

// WorkspaceSpec is the desired state of a Workspace: where the Pulumi program
// comes from, what the pod that runs it looks like, and which stacks it holds.
//
// +kubebuilder:validation:XValidation:rule="[has(self.git), has(self.flux), has(self.local), has(self.projectInfo)].filter(x, x).size() <= 1",message="at most one of spec.git, spec.flux, spec.local and spec.projectInfo may be set"
type WorkspaceSpec struct {
	// ServiceAccountName is the Kubernetes service account the workspace pod
	// runs as; it is the identity of every Pulumi operation run in the
	// workspace, and must be allowed to create TokenReviews (bind it to
	// system:auth-delegator) so that the agent can check who calls it.
	// Defaults to "default".
	// +kubebuilder:default=default
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// SecurityProfile selects how locked-down the workspace pod is:
	// "restricted" (the default) runs as a non-root user with a security
	// context that passes the Restricted Pod Security Standard; "baseline"
	// runs as root and passes the Baseline standard.
	// +kubebuilder:default=restricted
	// +optional
	SecurityProfile SecurityProfile `json:"securityProfile,omitempty"`

	// Image is the container image that provides the `pulumi` CLI and the
	// language runtime of the program. When empty, a default Pulumi image is
	// used that matches the security profile (a non-root variant for
	// "restricted").
	// +optional
	Image string `json:"image,omitempty"`

	// ImagePullPolicy is the pull policy of the workspace image: Always,
	// Never or IfNotPresent. When empty, Kubernetes' usual default applies
	// (Always for a :latest tag, IfNotPresent otherwise).
	// +kubebuilder:validation:Enum=Always;Never;IfNotPresent
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// Git fetches the program from a git repository.
	// Set at most one of git, flux, local and projectInfo.
	// +optional
	Git *GitSource `json:"git,omitempty"`

	// Flux fetches the program from a Flux source artifact (a tarball served
	// over HTTP).
	// +optional
	Flux *FluxSource `json:"flux,omitempty"`

	// Local uses a program that is already present in the workspace image.
	// +optional
	Local *LocalSource `json:"local,omitempty"`

	// ProjectInfo skips fetching any program: the workspace starts from a
	// minimal Pulumi.yaml holding only this project name and runtime. The
	// Stack controller uses it to destroy a stack whose source is gone.
	// +optional
	ProjectInfo *ProjectInfo `json:"projectInfo,omitempty"`

	// EnvFrom lists ConfigMaps and Secrets whose keys become environment
	// variables of the workspace container. When a key appears in several
	// sources the last one wins, and Env wins over all of them.
	// +listType=atomic
	// +optional
	EnvFrom []corev1.EnvFromSource `json:"envFrom,omitempty"`

	// Env lists environment variables of the workspace container, e.g.
	// PULUMI_ACCESS_TOKEN or cloud credentials; the Pulumi program and CLI
	// see them.
	// +listType=map
	// +listMapKey=name
	// +patchMergeKey=name
	// +patchStrategy=merge
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty" patchStrategy:"merge" patchMergeKey:"name"`

	// Resources are the compute requests and limits of the workspace
	// container, which runs the Pulumi CLI, the language host and the
	// providers.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// PodTemplate is merged (strategic merge patch) over the pod the
	// operator builds for the workspace, to add volumes, sidecars, node
	// selectors, tolerations and the like. The workspace container is named
	// "pulumi".
	// +optional
	PodTemplate *EmbeddedPodTemplateSpec `json:"podTemplate,omitempty"`

	// ServiceTemplate adds labels and annotations to the headless Service
	// in front of the workspace pod.
	// +optional
	ServiceTemplate *ServiceTemplate `json:"serviceTemplate,omitempty"`

	// PulumiLogLevel turns on verbose logging of the Pulumi CLI at this
	// level (the -v flag; 1 to 11, higher is noisier). Zero, the default,
	// leaves verbose logging off.
	// +optional
	PulumiLogLevel uint32 `json:"pulumiLogLevel,omitempty"`

	// SkipInstall skips the `pulumi install` step that fetches the
	// program's dependencies and plugins before each operation. Set it when
	// the image already holds everything the program needs (vendored
	// dependencies, a prebuilt binary). Projects that declare
	// runtime.options.binary are detected and skip the step without it.
	// +optional
	SkipInstall bool `json:"skipInstall,omitempty"`

	// Stacks lists the Pulumi stacks of the project that the workspace
	// selects (and creates if asked), with their configuration.
	// +listType=map
	// +listMapKey=name
	// +patchMergeKey=name
	// +patchStrategy=merge
	// +optional
	Stacks []WorkspaceStack `json:"stacks,omitempty" patchStrategy:"merge" patchMergeKey:"name"`
}

// GitSource locates a Pulumi program in a git repository.
type GitSource struct {
	// URL is the address of the repository to clone, e.g.
	// https://github.com/org/repo.git or git@github.com:org/repo.git.
	// +optional
	URL string `json:"url,omitempty"`

	// Ref is the branch, tag or commit SHA to check out.
	// +optional
	Ref string `json:"ref,omitempty"`

	// Dir is the directory within the repository that holds Pulumi.yaml;
	// empty means the repository root.
	// +optional
	Dir string `json:"dir,omitempty"`

	// Auth holds the credentials for cloning a private repository.
	// +optional
	Auth *GitAuth `json:"auth,omitempty"`

	// Shallow clones only the requested revision instead of the whole
	// history; faster, but a shallow clone can only check out branches and
	// tags, not arbitrary commits.
	// +optional
	Shallow bool `json:"shallow,omitempty"`
}

// GitAuth holds git credentials, each read from a key of a Secret in the
// workspace's namespace. Use one method: an SSH key (with its optional
// passphrase in password), a token, a username with a password, or a GitHub
// App.
type GitAuth struct {
	// SSHPrivateKey is a private key for cloning over SSH; the repository
	// URL must then be of the SSH form (git@host:org/repo.git).
	// +optional
	SSHPrivateKey *corev1.SecretKeySelector `json:"sshPrivateKey,omitempty"`

	// Username is the user name for HTTP basic authentication.
	// +optional
	Username *corev1.SecretKeySelector `json:"username,omitempty"`

	// Password is the password for HTTP basic authentication, or the
	// passphrase of the SSH private key.
	// +optional
	Password *corev1.SecretKeySelector `json:"password,omitempty"`

	// Token is a personal access token, used in place of a password.
	// +optional
	Token *corev1.SecretKeySelector `json:"token,omitempty"`

	// GitHubApp authenticates as a GitHub App installation; a short-lived
	// installation token is minted for each clone.
	// +optional
	GitHubApp *GitHubAppAuth `json:"githubApp,omitempty"`
}

// GitHubAppAuth holds the three values needed to act as a GitHub App
// installation, each read from a key of a Secret.
type GitHubAppAuth struct {
	// AppID selects the numeric ID of the GitHub App, stored as text.
	AppID corev1.SecretKeySelector `json:"appID"`

	// InstallationID selects the numeric ID of the App's installation on
	// the repository's owner, stored as text.
	InstallationID corev1.SecretKeySelector `json:"installationID"`

	// PrivateKey selects the App's PEM-encoded RSA private key.
	PrivateKey corev1.SecretKeySelector `json:"privateKey"`
}

// FluxSource locates a Pulumi program in an artifact served by Flux's source
// controller (from a GitRepository, OCIRepository, Bucket, ...).
type FluxSource struct {
	// URL is the HTTP address of the artifact tarball.
	// +optional
	URL string `json:"url,omitempty"`

	// Digest is the expected digest of the artifact, as
	// "<algorithm>:<checksum>"; a download that does not match is refused.
	// +optional
	Digest string `json:"digest,omitempty"`

	// Dir is the directory within the artifact that holds Pulumi.yaml;
	// empty means the artifact root.
	// +optional
	Dir string `json:"dir,omitempty"`
}

// LocalSource locates a Pulumi program already present in the workspace
// image.
type LocalSource struct {
	// Dir is the directory in the image that holds Pulumi.yaml.
	// +optional
	Dir string `json:"dir,omitempty"`
}

// ProjectInfo is the least a workspace needs to know about a Pulumi project
// to operate on its stacks without the program: its name and runtime, as
// they appear in Pulumi.yaml.
type ProjectInfo struct {
	// Name is the Pulumi project name (`name:` in Pulumi.yaml).
	Name string `json:"name"`

	// Runtime is the Pulumi runtime (`runtime:` in Pulumi.yaml), e.g.
	// nodejs, python, go or yaml.
	Runtime string `json:"runtime"`
}

// ServiceTemplate customizes the headless Service in front of a workspace
// pod.
type ServiceTemplate struct {
	// Metadata holds labels and annotations added to the Service.
	// +optional
	Metadata *EmbeddedObjectMeta `json:"metadata,omitempty"`
}

// WorkspaceStack is one Pulumi stack of a workspace's project, with the
// settings applied when the workspace selects it.
type WorkspaceStack struct {
	// Name is the stack name, either short ("dev") or fully qualified
	// ("org/project/dev").
	Name string `json:"name"`

	// Create creates the stack when it does not exist yet; otherwise a
	// missing stack is an error.
	// +optional
	Create *bool `json:"create,omitempty"`

	// SecretsProvider is the secrets provider to initialize the stack with,
	// e.g. "awskms://alias/key" or "passphrase"; empty means the backend's
	// default.
	// +optional
	SecretsProvider *string `json:"secretsProvider,omitempty"`

	// Config lists configuration values set on the stack before each
	// operation, in order.
	// +listType=map
	// +listMapKey=key
	// +patchMergeKey=key
	// +patchStrategy=merge
	// +optional
	Config []ConfigItem `json:"config,omitempty" patchStrategy:"merge" patchMergeKey:"key"`

	// Environment lists Pulumi ESC environments imported into the stack.
	// +listType=atomic
	// +optional
	Environment []string `json:"environment,omitempty"`
}

// ConfigItem is one configuration value of a stack, given inline or read
// from the workspace container.
// +structType=atomic
type ConfigItem struct {
	// Key is the configuration key, e.g. "aws:region", or a property path
	// such as "app:db.port" when path is true.
	Key string `json:"key"`

	// Path treats the key as a path into a structured value (object or
	// list) instead of a plain key. Not used with structured values.
	// +optional
	Path *bool `json:"path,omitempty"`

	// Value is the value to set: a string, number, boolean, object or
	// array. Structured values need Pulumi CLI 3.202.0 or later.
	// +optional
	Value *apiextensionsv1.JSON `json:"value,omitempty"`

	// ValueFrom reads the value from the workspace container instead.
	// +optional
	ValueFrom *ConfigValueFrom `json:"valueFrom,omitempty"`

	// Secret stores the value encrypted, as a Pulumi secret.
	// +optional
	Secret *bool `json:"secret,omitempty"`
}

// ConfigValueFrom reads a configuration value from the workspace container:
// from an environment variable or from a file.
// +structType=atomic
type ConfigValueFrom struct {
	// Env is the name of an environment variable of the workspace
	// container that holds the value.
	// +optional
	Env string `json:"env,omitempty"`

	// Path is the path of a file in the workspace container that holds the
	// value.
	// +optional
	Path string `json:"path,omitempty"`

	// JSON parses the value read as JSON, so that objects, arrays, numbers
	// and booleans keep their type; otherwise the value is a plain string.
	// +optional
	JSON bool `json:"json,omitempty"`
}

// EmbeddedPodTemplateSpec is a pod template nested in another object: the
// pod spec plus the only metadata that matters there, labels and
// annotations.
type EmbeddedPodTemplateSpec struct {
	// Metadata holds labels and annotations for the pod.
	// +optional
	Metadata EmbeddedObjectMeta `json:"metadata,omitempty"`

	// Spec is merged over the pod spec the operator generates.
	// +optional
	Spec *corev1.PodSpec `json:"spec,omitempty"`
}

// EmbeddedObjectMeta is the part of an object's metadata that a template for
// another object can set: labels and annotations.
type EmbeddedObjectMeta struct {
	// Labels are added to the object's labels.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations are added to the object's annotations.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// WorkspaceStatus is the observed state of a Workspace.
type WorkspaceStatus struct {
	// ObservedGeneration is the metadata.generation that the status
	// describes.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Address is the host:port at which the workspace's agent serves
	// requests, through the workspace Service.
	// +optional
	Address string `json:"address,omitempty"`

	// PulumiVersion is the version of the Pulumi CLI in the workspace image,
	// as reported by the agent.
	// +optional
	PulumiVersion string `json:"pulumiVersion,omitempty"`

	// Setup records what stackyard last applied to the running agent, so
	// that the stacks are set up again only when something they depend on
	// changed. It is kept in status, which only the operator writes, and
	// not in annotations, which anyone who may edit the Workspace can
	// write. Not part of upstream's API.
	// +optional
	Setup *WorkspaceSetup `json:"setup,omitempty"`

	// Conditions describe the workspace's state. Known types: Ready
	// (the agent is serving and the stacks are set up), Reconciling (setting
	// up is in progress, or a transient failure is being retried) and
	// Stalled (setting the workspace up failed in a way a retry will not
	// fix).
	// +listType=map
	// +listMapKey=type
	// +patchMergeKey=type
	// +patchStrategy=merge
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// WorkspaceSetup records a setup of a Workspace's agent by digests: the
// digests change when what they cover does, and reveal nothing of it.
type WorkspaceSetup struct {
	// Digest covers the agent instance, the source revision, spec.stacks
	// and spec.skipInstall as they were set up.
	// +optional
	Digest string `json:"digest,omitempty"`

	// Installed covers the agent instance and the source revision that
	// `pulumi install` last ran for.
	// +optional
	Installed string `json:"installed,omitempty"`

	// Revision is the source revision last set up.
	// +optional
	Revision string `json:"revision,omitempty"`
}

// Workspace is an execution environment for one Pulumi project: a pod that
// runs the stackyard agent next to the program's source, in which Updates
// run Pulumi operations on the project's stacks.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories={pulumi,stackyard}
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.status.address`
// +kubebuilder:printcolumn:name="Pulumi",type=string,priority=10,JSONPath=`.status.pulumiVersion`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Workspace struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired workspace: program source, pod and stacks.
	Spec WorkspaceSpec `json:"spec,omitempty"`
	// Status is the observed state of the workspace.
	Status WorkspaceStatus `json:"status,omitempty"`
}

// WorkspaceList is a list of Workspaces.
//
// +kubebuilder:object:root=true
type WorkspaceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Workspaces.
	Items []Workspace `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Workspace{}, &WorkspaceList{})
}
