package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CommitSelectionStrategy says which commits of the repository become
// releases (Kargo's names).
//
// +kubebuilder:validation:Enum=NewestFromBranch;SemVer;NewestTag;Lexical
type CommitSelectionStrategy string

const (
	// NewestFromBranch records each new head of the branch.
	NewestFromBranch CommitSelectionStrategy = "NewestFromBranch"
	// SemVer records each tag that is a semantic version within
	// semverConstraint, newest version first.
	SemVer CommitSelectionStrategy = "SemVer"
	// NewestTag records each tag, newest commit first.
	NewestTag CommitSelectionStrategy = "NewestTag"
	// Lexical records each tag, in reverse lexical order of their names.
	Lexical CommitSelectionStrategy = "Lexical"
)

// GitSubscription is the git repository a Pipeline watches, and which of
// its commits become releases.
//
// +kubebuilder:validation:XValidation:rule="!has(self.semverConstraint) || self.commitSelectionStrategy == 'SemVer'",message="spec.git.semverConstraint applies only to commitSelectionStrategy SemVer",fieldPath=".semverConstraint"
// +kubebuilder:validation:XValidation:rule="self.commitSelectionStrategy != 'NewestFromBranch' || (has(self.branch) && size(self.branch) > 0)",message="spec.git.branch is required with commitSelectionStrategy NewestFromBranch",fieldPath=".branch"
type GitSubscription struct {
	// RepoURL is the repository: https://, http:// or ssh://, or
	// user@host:path. The Stacks of the pipeline's stages should deploy
	// from the same repository.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	RepoURL string `json:"repoURL"`

	// Branch is the branch whose heads become releases, with
	// commitSelectionStrategy NewestFromBranch.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Branch string `json:"branch,omitempty"`

	// CommitSelectionStrategy says which commits become releases; default
	// NewestFromBranch.
	// +optional
	// +kubebuilder:default=NewestFromBranch
	CommitSelectionStrategy CommitSelectionStrategy `json:"commitSelectionStrategy,omitempty"`

	// SemverConstraint limits the tags that become releases, with
	// commitSelectionStrategy SemVer, e.g. "^1.2.0" or ">=1.0.0 <2.0.0".
	// +optional
	// +kubebuilder:validation:MaxLength=255
	SemverConstraint string `json:"semverConstraint,omitempty"`

	// IncludePaths, when set, makes a commit a release only if it changes
	// a file under one of these paths (a prefix such as "infra/", or a
	// glob such as "*.yaml"); with NewestFromBranch only.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=1024
	IncludePaths []string `json:"includePaths,omitempty"`

	// ExcludePaths makes a commit that changes only files under these
	// paths no release; with NewestFromBranch only.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=1024
	ExcludePaths []string `json:"excludePaths,omitempty"`

	// DiscoveryLimit is how many candidate commits or tags one discovery
	// looks at, newest first; default 20.
	// +optional
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	DiscoveryLimit int32 `json:"discoveryLimit,omitempty"`

	// SecretRef names a Secret, in the Pipeline's namespace, holding the
	// repository's credentials under the keys username and password, or
	// accessToken, or sshPrivateKey with knownHosts (the server's
	// known_hosts lines: its host key is always verified) and an optional
	// password. Read by the operator only.
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`
}

// Keys of the Secret a Pipeline's spec.git.secretRef names.
const (
	// GitSecretKeyUsername is the HTTP basic user name (with GitSecretKeyPassword,
	// or with GitSecretKeyAccessToken for hosts that want a particular one).
	GitSecretKeyUsername = "username"
	// GitSecretKeyPassword is the HTTP basic password, or, with
	// GitSecretKeySSHPrivateKey, the key's passphrase.
	GitSecretKeyPassword = "password"
	// GitSecretKeyAccessToken is an access token, sent as the HTTP basic
	// password.
	GitSecretKeyAccessToken = "accessToken"
	// GitSecretKeySSHPrivateKey is an SSH private key, for ssh:// and
	// user@host:path URLs.
	GitSecretKeySSHPrivateKey = "sshPrivateKey"
	// GitSecretKeyKnownHosts is known_hosts content that the SSH server's
	// host key is checked against; required with GitSecretKeySSHPrivateKey.
	GitSecretKeyKnownHosts = "knownHosts"
)

// Reasons of a Pipeline's conditions, and of the waits of a promotion
// that reads the pipeline's repository, about spec.git.secretRef.
const (
	// PipelineReasonReferenceNotFound: the Secret spec.git.secretRef
	// names, or its keys, do not exist.
	PipelineReasonReferenceNotFound = "ReferenceNotFound"
	// PipelineReasonSecretReadFailed: the Secret could not be read.
	PipelineReasonSecretReadFailed = "SecretReadFailed"
)

// PipelineSpec is what a Pipeline watches and how much it keeps.
type PipelineSpec struct {
	// Git is the repository the releases come from.
	Git GitSubscription `json:"git"`

	// Interval is how often the repository is polled for new releases;
	// default 1m. Pipelines and Stacks on one repository share each poll.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^-?(0|([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+)$`
	Interval *metav1.Duration `json:"interval,omitempty"`

	// ReleaseRetention is how many releases are kept, newest first;
	// default 20. A release that a stage runs, or that is the newest
	// verified in a stage (its rollback target), is never pruned.
	// +optional
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	ReleaseRetention int32 `json:"releaseRetention,omitempty"`

	// PromotionRetention is how many finished Promotions of each stage are
	// kept as its audit trail, newest first; default 100.
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	PromotionRetention int32 `json:"promotionRetention,omitempty"`

	// PullRequests, when set, previews each open pull request against the
	// branch and posts the outcome back to it. Setting or changing it
	// needs the verb "govern" on the Pipeline.
	// +optional
	PullRequests *PullRequestPreviews `json:"pullRequests,omitempty"`
}

// PipelineStatus is what the Pipeline found.
type PipelineStatus struct {
	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are Ready, Reconciling and Stalled (kstatus).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastDiscoveryTime is when the repository was last polled
	// successfully.
	// +optional
	LastDiscoveryTime *metav1.Time `json:"lastDiscoveryTime,omitempty"`

	// LatestRelease is the name of the newest Release.
	// +optional
	LatestRelease string `json:"latestRelease,omitempty"`

	// PullRequests is what spec.pullRequests found and did.
	// +optional
	PullRequests *PullRequestPreviewsStatus `json:"pullRequests,omitempty"`
}

// Pipeline subscribes to a git repository and records its new versions as
// Releases, which its Stages promote.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName={sypipeline,sypipe},categories=stackyard
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Repository",type=string,JSONPath=`.spec.git.repoURL`
// +kubebuilder:printcolumn:name="Latest",type=string,JSONPath=`.status.latestRelease`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Pipeline struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the subscription.
	Spec PipelineSpec `json:"spec"`
	// Status is what was discovered.
	Status PipelineStatus `json:"status,omitempty"`
}

// PipelineList is a list of Pipelines.
//
// +kubebuilder:object:root=true
type PipelineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Pipelines.
	Items []Pipeline `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Pipeline{}, &PipelineList{})
}
