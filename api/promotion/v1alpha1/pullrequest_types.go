package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Forge is the API a Pipeline reads pull requests from and writes their
// preview comments and commit statuses to.
//
// +kubebuilder:validation:Enum=gitea;github;gitlab
type Forge string

const (
	// ForgeGitea is Gitea's API, which Forgejo serves too.
	ForgeGitea Forge = "gitea"
	// ForgeGitHub is GitHub's REST API.
	ForgeGitHub Forge = "github"
	// ForgeGitLab is GitLab's REST API (merge requests).
	ForgeGitLab Forge = "gitlab"
)

// ForgeTokenKey is the key of a pull-request Secret that holds the
// forge's API token.
const ForgeTokenKey = "token"

// PullRequestPreviews makes a Pipeline preview each open pull request
// against its branch: the pull request's head is previewed against the
// Stacks of the stages named, each with its own config, secrets and
// backend, and the outcome is posted back to the pull request as one
// comment, edited as the pull request changes, and as a commit status.
//
// A preview runs the pull request's program with the Stacks' credentials:
// whoever may push a branch to the repository can read what those Stacks
// can. Setting, changing or removing this needs the verb "govern" on the
// Pipeline and on every stage that stages names.
// Pull requests from forks are never previewed unless allowForks says so.
type PullRequestPreviews struct {
	// Forge is the forge's API: gitea (also Forgejo), github or gitlab.
	Forge Forge `json:"forge"`

	// APIURL is the root of the forge's API, e.g.
	// https://gitea.example.com/api/v1, https://api.github.com or
	// https://gitlab.example.com/api/v4.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	APIURL string `json:"apiURL"`

	// SecretRef names a Secret of the Pipeline's namespace whose key
	// "token" is the forge's API token: read pull requests, write their
	// comments and commit statuses. Naming it needs the verb "get" on it.
	SecretRef corev1.LocalObjectReference `json:"secretRef"`

	// Stages are the stages whose Stacks each pull request is previewed
	// against.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=253
	Stages []string `json:"stages"`

	// AllowForks previews pull requests from forks too, with the Stacks'
	// credentials. Off by default: a fork's author is anyone, and the
	// program they submit runs in the preview; with the Stacks'
	// credentials it could read and send them anywhere.
	// +optional
	AllowForks bool `json:"allowForks,omitempty"`

	// MaxPreviews is how many pull requests are previewed at once, the
	// oldest first; default 3. The others wait their turn.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	MaxPreviews int32 `json:"maxPreviews,omitempty"`

	// ReviewStacks, when set, also deploys each open pull request that
	// may be previewed as a temporary Stack of its own, from a template,
	// and destroys it when the pull request closes.
	// +optional
	ReviewStacks *ReviewStacks `json:"reviewStacks,omitempty"`

	// Interval is how often the forge is asked for open pull requests;
	// default 2m. A Receiver that hears a pull-request event wakes the
	// Pipeline sooner.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^-?(0|([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+)$`
	Interval *metav1.Duration `json:"interval,omitempty"`
}

// PullRequestPhase is where the preview of a pull request's head is.
type PullRequestPhase string

const (
	// PullRequestWaiting: more pull requests are open than maxPreviews;
	// this one waits its turn.
	PullRequestWaiting PullRequestPhase = "Waiting"
	// PullRequestPreviewing: its previews run.
	PullRequestPreviewing PullRequestPhase = "Previewing"
	// PullRequestPreviewed: every preview succeeded and was posted.
	PullRequestPreviewed PullRequestPhase = "Previewed"
	// PullRequestFailed: a preview failed; posted too.
	PullRequestFailed PullRequestPhase = "Failed"
	// PullRequestSkipped: not previewed (a fork, without allowForks).
	PullRequestSkipped PullRequestPhase = "Skipped"
)

// PullRequestStatus is what was done for one open pull request.
type PullRequestStatus struct {
	// Number is the pull request's number (GitLab: the merge request's
	// iid).
	Number int64 `json:"number"`

	// Head is the commit previewed.
	Head string `json:"head"`

	// Fork says the pull request comes from another repository.
	// +optional
	Fork bool `json:"fork,omitempty"`

	// Phase is where its preview is.
	Phase PullRequestPhase `json:"phase"`

	// Message says what the preview found, or why it failed or was
	// skipped.
	// +optional
	Message string `json:"message,omitempty"`

	// CommentID is the forge's id of the comment the previews are posted
	// in, which each new head edits.
	// +optional
	CommentID string `json:"commentID,omitempty"`

	// Posted is the head whose outcome the comment and the commit status
	// show.
	// +optional
	Posted string `json:"posted,omitempty"`

	// ReviewStack is the pull request's review stack
	// (spec.pullRequests.reviewStacks).
	// +optional
	ReviewStack *ReviewStackStatus `json:"reviewStack,omitempty"`

	// Stacks are the previews of the head, one per Stack.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Stacks []PullRequestStackPreview `json:"stacks,omitempty"`
}

// PullRequestStackPreview is the preview of a pull request's head against
// one Stack.
type PullRequestStackPreview struct {
	// Stage is the stage the Stack belongs to.
	Stage string `json:"stage"`
	// Stack is the Stack's name.
	Stack string `json:"stack"`
	// Update is the preview Update.
	// +optional
	Update string `json:"update,omitempty"`
	// Recorded are the UIDs of the preview's Workspace and Update, as the
	// API server gave them to the Pipeline when it made them: an object
	// under their names with another UID is not the preview's, and runs
	// nothing.
	// +optional
	Recorded *PreviewRecord `json:"recorded,omitempty"`
	// Summary counts the changes, once the preview succeeded.
	// +optional
	Summary *ChangeSummary `json:"summary,omitempty"`
	// Failure says why the preview failed, or could not run.
	// +optional
	Failure string `json:"failure,omitempty"`
}

// PreviewRecord holds the UIDs of the Workspace and the Update a preview
// made, as the API server returned them.
type PreviewRecord struct {
	// Workspace is the preview Workspace's metadata.uid.
	// +optional
	Workspace types.UID `json:"workspace,omitempty"`
	// Update is the current attempt's Update's metadata.uid.
	// +optional
	Update types.UID `json:"update,omitempty"`
}

// PullRequestPreviewsStatus is what the Pipeline knows of its pull
// requests.
type PullRequestPreviewsStatus struct {
	// LastCheckTime is when the forge was last asked for open pull
	// requests.
	// +optional
	LastCheckTime *metav1.Time `json:"lastCheckTime,omitempty"`

	// Error is why the forge could not be asked, or answered with an
	// error, on the last try; empty when it answered.
	// +optional
	Error string `json:"error,omitempty"`

	// PullRequests are the open pull requests against the Pipeline's
	// branch, by number.
	// +optional
	// +listType=map
	// +listMapKey=number
	// +kubebuilder:validation:MaxItems=100
	PullRequests []PullRequestStatus `json:"pullRequests,omitempty"`
}
