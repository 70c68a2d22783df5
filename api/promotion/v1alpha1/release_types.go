package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PipelineLabel names, on a Release, a Promotion and a pull request's
// preview Update, the Pipeline it belongs to, so that each can be listed
// by pipeline. A Stage names its pipeline in spec.pipeline instead.
const PipelineLabel = "promotion.stackyard.dev/pipeline"

// StageLabel names, on a Promotion, the Stage it promotes into.
const StageLabel = "promotion.stackyard.dev/stage"

// ReleaseCommit is the commit a release is.
type ReleaseCommit struct {
	// SHA is the full commit SHA (40 hex digits).
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{40}$`
	SHA string `json:"sha"`

	// Tag is the tag that made the commit a release, with the tag
	// strategies.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Tag string `json:"tag,omitempty"`

	// Branch is the branch the commit was the head of, with
	// NewestFromBranch.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Branch string `json:"branch,omitempty"`

	// Subject is the first line of the commit message.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Subject string `json:"subject,omitempty"`

	// Message is the commit message, cut at 4 KiB.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`

	// Author is the commit's author, "Name <email>".
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Author string `json:"author,omitempty"`

	// Time is the commit's committer time.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}

// ReleaseSpec is one version of the program. It never changes.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a Release is immutable: its spec cannot change"
type ReleaseSpec struct {
	// Pipeline is the Pipeline that discovered the release.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Pipeline string `json:"pipeline"`

	// Commit is the version.
	Commit ReleaseCommit `json:"commit"`
}

// ReleaseInStage is where a release is, or was, in one stage.
type ReleaseInStage struct {
	// Since is when the release got there: promoted, verified or failed.
	Since metav1.Time `json:"since"`
	// Promotion is the Promotion that brought it.
	// +optional
	Promotion string `json:"promotion,omitempty"`
	// Message says what happened, for a failure.
	// +optional
	Message string `json:"message,omitempty"`
}

// ReleaseStatus says where the release is.
type ReleaseStatus struct {
	// CurrentlyIn maps each stage that runs the release now to since when.
	// +optional
	CurrentlyIn map[string]ReleaseInStage `json:"currentlyIn,omitempty"`

	// VerifiedIn maps each stage where the release was verified (all its
	// Stacks Ready at the release's commit) to since when: downstream
	// stages take it from there, once it has soaked for their
	// requiredSoakTime.
	// +optional
	VerifiedIn map[string]ReleaseInStage `json:"verifiedIn,omitempty"`

	// FailedIn maps each stage where a promotion of the release failed to
	// when and why: it is never promoted there automatically again (a
	// person may still promote it).
	// +optional
	FailedIn map[string]ReleaseInStage `json:"failedIn,omitempty"`
}

// Release is one version of the program a Pipeline discovered: a commit
// of its repository. The Pipeline creates it; it is immutable.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName={syrelease,syrel},categories=stackyard
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Pipeline",type=string,JSONPath=`.spec.pipeline`
// +kubebuilder:printcolumn:name="Commit",type=string,JSONPath=`.spec.commit.sha`
// +kubebuilder:printcolumn:name="Tag",type=string,JSONPath=`.spec.commit.tag`
// +kubebuilder:printcolumn:name="Subject",type=string,JSONPath=`.spec.commit.subject`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Release struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the version.
	Spec ReleaseSpec `json:"spec"`
	// Status is where it runs.
	Status ReleaseStatus `json:"status,omitempty"`
}

// ReleaseList is a list of Releases.
//
// +kubebuilder:object:root=true
type ReleaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Releases.
	Items []Release `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Release{}, &ReleaseList{})
}
