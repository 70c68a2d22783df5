package shared

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
)

// ReconcileRequestAnnotation is the annotation that asks for a Stack to be
// processed again even though its spec has not changed: set it to a new
// value (a timestamp, say) and the operator runs the stack and echoes the
// value into status.observedReconcileRequest.
const ReconcileRequestAnnotation = "pulumi.com/reconciliation-request"

// StackSpec is the desired state of a Stack: which Pulumi stack to deploy,
// from which program source, with which configuration and credentials, and
// how the operator keeps it up to date.
//
// The program comes from exactly one of a git repository (projectRepo with
// commit or branch), a Flux source (fluxSource) or a Program object
// (programRef).
//
// +kubebuilder:validation:XValidation:rule="!(has(self.commit) && size(self.commit) > 0 && has(self.branch) && size(self.branch) > 0)",message="spec.commit and spec.branch are mutually exclusive"
// +kubebuilder:validation:XValidation:rule="!has(self.projectRepo) || size(self.projectRepo) == 0 || (has(self.commit) && size(self.commit) > 0) || (has(self.branch) && size(self.branch) > 0)",message="spec.projectRepo needs one of spec.commit or spec.branch"
// +kubebuilder:validation:XValidation:rule="[has(self.projectRepo) && size(self.projectRepo) > 0, has(self.fluxSource), has(self.programRef)].filter(x, x).size() <= 1",message="at most one of spec.projectRepo, spec.fluxSource and spec.programRef may be set"
//
// A configuration key is set in one place. The API server refuses a spec
// that sets one key in two of configRef, secrets and secretsRef, naming the
// key (the upstream operator accepts it and then fails every update with
// "duplicate entries for key"); a key of config that is also set in one of
// those (CEL cannot see into config's free-form values) stalls the Stack
// with reason SpecInvalid, naming the field. Each of the four maps holds at
// most 512 keys, which keeps these checks within the API server's cost
// budget.
// +kubebuilder:validation:XValidation:rule="!has(self.configRef) || !has(self.secrets) || self.secrets.all(k, !(k in self.configRef))",messageExpression="'spec.secrets[' + self.secrets.filter(k, k in self.configRef)[0] + ']: the key is also set in spec.configRef; set each configuration key in one place'",fieldPath=".secrets"
// +kubebuilder:validation:XValidation:rule="!has(self.configRef) || !has(self.secretsRef) || self.secretsRef.all(k, !(k in self.configRef))",messageExpression="'spec.secretsRef[' + self.secretsRef.filter(k, k in self.configRef)[0] + ']: the key is also set in spec.configRef; set each configuration key in one place'",fieldPath=".secretsRef"
// +kubebuilder:validation:XValidation:rule="!has(self.secrets) || !has(self.secretsRef) || self.secretsRef.all(k, !(k in self.secrets))",messageExpression="'spec.secretsRef[' + self.secretsRef.filter(k, k in self.secrets)[0] + ']: the key is also set in spec.secrets; set each configuration key in one place'",fieldPath=".secretsRef"
type StackSpec struct {
	// Stack is the name of the Pulumi stack to deploy: "<org>/<project>/<stack>"
	// (or "<org>/<stack>", or just "<stack>" with the backend's default
	// organization).
	// +kubebuilder:validation:MinLength=1
	Stack string `json:"stack"`

	// Backend is the URL of the state backend, e.g. "https://api.pulumi.com"
	// (Pulumi Cloud, the default), a self-hosted Pulumi Cloud URL,
	// "s3://bucket", "azblob://container", "gs://bucket" or "file:///path".
	// Pass the backend's credentials with envRefs.
	// +optional
	Backend string `json:"backend,omitempty"`

	// AccessTokenSecret is the name of a Secret whose accessToken key holds
	// a Pulumi access token.
	// Deprecated: use envRefs to set PULUMI_ACCESS_TOKEN from a Secret.
	// +optional
	AccessTokenSecret string `json:"accessTokenSecret,omitempty"`

	// Envs lists ConfigMaps whose keys become environment variables of the
	// workspace.
	// Deprecated: use envRefs.
	// +optional
	Envs []string `json:"envs,omitempty"`

	// SecretEnvs lists Secrets whose keys become environment variables of
	// the workspace.
	// Deprecated: use envRefs.
	// +optional
	SecretEnvs []string `json:"envSecrets,omitempty"`

	// EnvRefs sets environment variables of the Pulumi program and CLI,
	// such as PULUMI_ACCESS_TOKEN or cloud credentials: each key is a
	// variable name and each value says where its value comes from (a
	// literal, a Secret key, or an environment variable or file of the
	// operator).
	// +optional
	EnvRefs map[string]ResourceRef `json:"envRefs,omitempty"`

	// Config sets stack configuration values, keyed by configuration key
	// (e.g. "aws:region"). A value may be a string or any structured value:
	// number, boolean, object or array (structured values need Pulumi CLI
	// 3.202.0 or later). The values are merged over the configuration
	// checked in with the program.
	// +optional
	// +kubebuilder:validation:MaxProperties=512
	Config map[string]apiextensionsv1.JSON `json:"config,omitempty"`

	// ConfigRef sets stack configuration values read from ConfigMaps, keyed
	// by configuration key.
	// +optional
	// +kubebuilder:validation:MaxProperties=512
	ConfigRef map[string]ConfigMapRef `json:"configRef,omitempty"`

	// Secrets sets secret stack configuration values inline, keyed by
	// configuration key; they are stored encrypted in the stack.
	// Deprecated: use secretsRef, which can read them from Secrets.
	// +optional
	// +kubebuilder:validation:MaxProperties=512
	Secrets map[string]string `json:"secrets,omitempty"`

	// SecretRefs sets secret stack configuration values, keyed by
	// configuration key, each read from where its ResourceRef points
	// (usually a Secret key). They are stored encrypted in the stack.
	// +optional
	// +kubebuilder:validation:MaxProperties=512
	SecretRefs map[string]ResourceRef `json:"secretsRef,omitempty"`

	// SecretsProvider is the secrets provider a new stack is initialized
	// with, e.g. "awskms://alias/mykey?region=us-east-1",
	// "azurekeyvault://vault.vault.azure.net/keys/key",
	// "gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k" or
	// "passphrase". Empty means the backend's default.
	// +optional
	SecretsProvider string `json:"secretsProvider,omitempty"`

	// Environment lists Pulumi ESC environments imported into the stack.
	// +listType=atomic
	// +optional
	Environment []string `json:"environment,omitempty"`

	// GitSource holds the git source settings, which sit directly in the
	// spec (projectRepo, commit, branch, ...).
	*GitSource `json:",inline"`

	// FluxSource takes the program from a Flux source object (GitRepository,
	// OCIRepository, Bucket, ...) in the Stack's namespace.
	// +optional
	FluxSource *FluxSource `json:"fluxSource,omitempty"`

	// ProgramRef takes the program from a Program object in the Stack's
	// namespace.
	// +optional
	ProgramRef *ProgramReference `json:"programRef,omitempty"`

	// Targets lists the URNs of the only resources to update; empty means
	// all.
	// +optional
	Targets []string `json:"targets,omitempty"`

	// TargetDependents also updates the resources that depend on the
	// targets.
	// +optional
	TargetDependents bool `json:"targetDependents,omitempty"`

	// Prerequisites lists other Stacks, in the same namespace, that must
	// have succeeded before this one is updated, optionally recently
	// enough; a prerequisite that succeeded too long ago is run again
	// first. At most 64.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Prerequisites []PrerequisiteRef `json:"prerequisites,omitempty"`

	// ContinueResyncOnCommitMatch keeps running the stack every
	// resyncFrequencySeconds even when the source revision has already been
	// deployed, which corrects drift and picks up changes the revision does
	// not capture (e.g. a program that reads external data). By default a
	// revision that succeeded is not run again.
	// +optional
	ContinueResyncOnCommitMatch bool `json:"continueResyncOnCommitMatch,omitempty"`

	// ResyncFrequencySeconds is the interval, in seconds, at which a branch
	// is polled for new commits and, with continueResyncOnCommitMatch, at
	// which the stack is run again. 0 means the default of 60. The shortest
	// interval is 60 seconds: smaller positive values are accepted, as the
	// Pulumi Kubernetes Operator accepts them, and treated as 60.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ResyncFrequencySeconds int64 `json:"resyncFrequencySeconds,omitempty"`

	// Refresh refreshes the stack's state from the real resources before
	// each update. Recommended.
	// +optional
	Refresh bool `json:"refresh,omitempty"`

	// ExpectNoRefreshChanges fails the update when the refresh before it
	// finds changes, i.e. when the resources changed outside Pulumi.
	// +optional
	ExpectNoRefreshChanges bool `json:"expectNoRefreshChanges,omitempty"`

	// DestroyOnFinalize destroys the stack's resources (pulumi destroy)
	// when the Stack object is deleted; deletion waits for the destroy.
	// +optional
	DestroyOnFinalize bool `json:"destroyOnFinalize,omitempty"`

	// RemoveOnFinalize also removes the stack itself from its backend,
	// with its configuration and history, once the destroy on deletion
	// (destroyOnFinalize, or a ttl that ran out) has deleted its
	// resources: `pulumi destroy --remove`. For temporary stacks, whose
	// emptied state would otherwise pile up in the backend. Review stacks
	// set it. A stackyard extension (asked of the upstream operator in
	// #790).
	// +optional
	RemoveOnFinalize bool `json:"removeOnFinalize,omitempty"`

	// RunProgram runs the program during the destroy of destroyOnFinalize
	// (and refreshes), for programs that configure their providers in code,
	// e.g. with credentials fetched at run time.
	// +optional
	RunProgram bool `json:"runProgram,omitempty"`

	// RetryOnUpdateConflict retries an update that failed because another
	// update of the same stack was running (HTTP 409), instead of stalling.
	// Only safe when updates are idempotent.
	// +optional
	RetryOnUpdateConflict bool `json:"retryOnUpdateConflict,omitempty"`

	// RetryMaxBackoffDurationSeconds caps, in seconds, the exponentially
	// growing wait between retries of a failed update. Defaults to 86400
	// (24 hours).
	// +optional
	RetryMaxBackoffDurationSeconds int64 `json:"retryMaxBackoffDurationSeconds,omitempty"`

	// UseLocalStackOnly refuses to create the Pulumi stack when it does not
	// exist yet; only a stack that already exists (in the backend and the
	// program's source) is used. By default a missing stack is created.
	// +optional
	UseLocalStackOnly bool `json:"useLocalStackOnly,omitempty"`

	// Preview runs previews only, never updates: the Stack reports what an
	// update would change without changing anything.
	// +optional
	Preview bool `json:"preview,omitempty"`

	// DriftDetection, when set, periodically checks whether the stack's
	// resources still match what was deployed (a preview with refresh,
	// which changes nothing) and reports the result in the DriftDetected
	// condition, status.lastDriftCheck and an event. Infrastructure is only
	// changed when remediate is set. A stackyard extension (asked of the
	// upstream operator in #1037).
	// +optional
	DriftDetection *DriftDetection `json:"driftDetection,omitempty"`

	// TTL is how long the Stack lives, counted from its creation
	// (metadata.creationTimestamp), e.g. "72h". Once it has passed, the
	// operator deletes the Stack and, before the Stack goes, destroys the
	// stack's resources (as destroyOnFinalize does, whether or not that is
	// set; a preview-only Stack destroys nothing). status.expiresAt says
	// when. A TTL can be set, lengthened or shortened at any time; one
	// that has already passed expires the Stack at once. A Stack a stage
	// governs cannot have one: its resources go only through its
	// governors. What Pulumi Deployments calls a TTL stack. A stackyard
	// extension.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="spec.ttl must be longer than 0s"
	TTL *metav1.Duration `json:"ttl,omitempty"`

	// ServiceAccountName is the Kubernetes service account the stack's
	// workspace pod runs as, i.e. the identity the Pulumi program has in
	// the cluster. It must be allowed to create TokenReviews (bind it to
	// system:auth-delegator) so that the workspace's agent can check who
	// calls it. Defaults to "default".
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// WorkspaceTemplate is merged, as a strategic merge patch, over the
	// Workspace generated for the stack: use it to set the image, resources,
	// environment, volumes, labels and the like.
	// +optional
	WorkspaceTemplate *autov1alpha1.WorkspaceTemplate `json:"workspaceTemplate,omitempty"`

	// WorkspaceReclaimPolicy decides what happens to the workspace once the
	// stack is up to date: Retain (the default when unset) keeps it running
	// for the next update; Delete removes it to save resources, at the cost
	// of a slower next update.
	// +optional
	WorkspaceReclaimPolicy WorkspaceReclaimPolicy `json:"workspaceReclaimPolicy,omitempty"`

	// UpdateTemplate is merged, as a strategic merge patch, over each Update
	// created for the stack: use it to label Updates or to set how long
	// finished ones are kept (spec.ttlAfterCompleted).
	// +optional
	UpdateTemplate *autov1alpha1.UpdateTemplate `json:"updateTemplate,omitempty"`
}

// GitSource says where to fetch a program from a git repository. Its fields
// sit directly in the StackSpec.
type GitSource struct {
	// ProjectRepo is the URL of the git repository holding the program,
	// e.g. https://github.com/org/repo.git. Needs commit or branch.
	// +optional
	ProjectRepo string `json:"projectRepo,omitempty"`

	// Commit is the SHA of the commit to deploy. Mutually exclusive with
	// branch.
	// +optional
	Commit string `json:"commit,omitempty"`

	// Branch is the branch to deploy, e.g. "main" or "refs/heads/main"; the
	// branch is polled every resyncFrequencySeconds and each new commit is
	// deployed. Mutually exclusive with commit.
	// +optional
	Branch string `json:"branch,omitempty"`

	// RepoDir is the directory within the repository that holds
	// Pulumi.yaml; empty means the repository root.
	// +optional
	RepoDir string `json:"repoDir,omitempty"`

	// GitAuth holds the credentials for a private repository. Use one
	// method; if several are set, an SSH key is used first, then an access
	// token, then basic auth, then a GitHub App.
	// +optional
	GitAuth *GitAuthConfig `json:"gitAuth,omitempty"`

	// GitAuthSecret is the name of a Secret holding git credentials, in
	// one of the keys accessToken, sshPrivateKey (with optional password),
	// or username and password.
	// Deprecated: use gitAuth.
	// +optional
	GitAuthSecret string `json:"gitAuthSecret,omitempty"`

	// Shallow fetches only the revision to deploy instead of the whole
	// history; faster for large repositories.
	// +optional
	Shallow bool `json:"shallow,omitempty"`
}

// GitAuthConfig holds the credentials for a private git repository, each
// value located by a ResourceRef. Set one of the methods.
type GitAuthConfig struct {
	// PersonalAccessToken is a token used as the HTTP password, e.g. a
	// GitHub personal access token.
	// +optional
	PersonalAccessToken *ResourceRef `json:"accessToken,omitempty"`

	// SSHAuth authenticates with an SSH private key; the repository URL
	// must then be of the SSH form (git@host:org/repo.git).
	// +optional
	SSHAuth *SSHAuth `json:"sshAuth,omitempty"`

	// BasicAuth authenticates with a user name and password over HTTP.
	// +optional
	BasicAuth *BasicAuth `json:"basicAuth,omitempty"`

	// GitHubApp authenticates as a GitHub App installation; a short-lived
	// installation token is minted whenever the repository is accessed.
	// +optional
	GitHubApp *GitHubAppAuth `json:"githubApp,omitempty"`
}

// SSHAuth is SSH key authentication for git.
type SSHAuth struct {
	// SSHPrivateKey locates the private key, in PEM or OpenSSH format.
	SSHPrivateKey ResourceRef `json:"sshPrivateKey"`

	// Password locates the key's passphrase, if it has one.
	// +optional
	Password *ResourceRef `json:"password,omitempty"`
}

// BasicAuth is user name and password authentication for git over HTTP.
type BasicAuth struct {
	// UserName locates the user name.
	UserName ResourceRef `json:"userName"`

	// Password locates the password.
	Password ResourceRef `json:"password"`
}

// GitHubAppAuth is GitHub App authentication for git: the operator exchanges
// the App's credentials for a short-lived installation token.
type GitHubAppAuth struct {
	// AppID locates the numeric ID of the GitHub App, as text; normally a
	// Secret key.
	AppID ResourceRef `json:"appID"`

	// InstallationID locates the numeric ID of the App's installation on
	// the repository's owner, as text; normally a Secret key.
	InstallationID ResourceRef `json:"installationID"`

	// PrivateKey locates the App's PEM-encoded RSA private key; normally a
	// Secret key.
	PrivateKey ResourceRef `json:"privateKey"`
}

// FluxSource takes a program from the artifact of a Flux source object.
type FluxSource struct {
	// SourceRef names the Flux source object, in the Stack's namespace.
	SourceRef FluxSourceReference `json:"sourceRef"`

	// Dir is the directory within the artifact that holds Pulumi.yaml;
	// empty means the artifact root.
	// +optional
	Dir string `json:"dir,omitempty"`
}

// FluxSourceReference names a Flux source object by API version, kind and
// name.
type FluxSourceReference struct {
	// APIVersion is the source's API version, e.g.
	// "source.toolkit.fluxcd.io/v1".
	APIVersion string `json:"apiVersion"`

	// Kind is the source's kind, e.g. GitRepository, OCIRepository or
	// Bucket.
	Kind string `json:"kind"`

	// Name is the source's name.
	Name string `json:"name"`
}

// ProgramReference names a Program object in the Stack's namespace.
type ProgramReference struct {
	// Name is the name of the Program.
	Name string `json:"name"`
}

// PrerequisiteRef names another Stack that must have succeeded before this
// one is updated.
type PrerequisiteRef struct {
	// Name is the name of the prerequisite Stack, in the same namespace.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// Requirement tightens what counts as satisfied; by default the
	// prerequisite only has to be in a succeeded state.
	// +optional
	Requirement *RequirementSpec `json:"requirement,omitempty"`
}

// RequirementSpec holds extra conditions for a prerequisite to count as
// satisfied; all that are set must hold.
type RequirementSpec struct {
	// SucceededWithinDuration is how recently the prerequisite must have
	// succeeded, as a duration such as "1h"; a prerequisite that succeeded
	// longer ago is run again before this stack. A Go duration: numbers
	// with units ns, us, ms, s, m or h ("90m", "1h30m"); anything else is
	// refused, since no client could read the Stack back.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^-?(0|([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+)$`
	SucceededWithinDuration *metav1.Duration `json:"succeededWithinDuration,omitempty"`
}

// ConfigMapRef locates a stack configuration value in a ConfigMap in the
// Stack's namespace.
type ConfigMapRef struct {
	// Name is the name of the ConfigMap.
	Name string `json:"name"`

	// Key is the key within the ConfigMap.
	Key string `json:"key"`

	// JSON parses the value as JSON, so that objects, arrays, numbers and
	// booleans keep their type; otherwise it is a plain string.
	// +optional
	JSON *bool `json:"json,omitempty"`
}

// WorkspaceReclaimPolicy decides whether a stack's workspace is kept or
// deleted once the stack is up to date. Empty means Retain.
// +kubebuilder:validation:Enum=Retain;Delete
type WorkspaceReclaimPolicy string

const (
	// WorkspaceReclaimRetain keeps the workspace running between updates.
	WorkspaceReclaimRetain WorkspaceReclaimPolicy = "Retain"
	// WorkspaceReclaimDelete deletes the workspace once the stack is up to
	// date; the next update creates it again.
	WorkspaceReclaimDelete WorkspaceReclaimPolicy = "Delete"
)

// DriftDetection configures periodic drift checks of a Stack.
type DriftDetection struct {
	// IntervalSeconds is the time between two checks of a Stack that is up
	// to date, in seconds. Default 3600; the shortest is 60.
	// +optional
	// +kubebuilder:validation:Minimum=0
	IntervalSeconds int64 `json:"intervalSeconds,omitempty"`
	// Remediate runs an update when a check finds drift, bringing the
	// resources back to what the program declares. Off by default: drift
	// is only reported.
	// +optional
	Remediate bool `json:"remediate,omitempty"`
}
