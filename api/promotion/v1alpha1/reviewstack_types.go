package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stackyard/stackyard/api/pulumi/shared"
)

// ReviewStacks deploys each open pull request that may be previewed as a
// temporary Stack of its own, a review stack: made from the template at
// the pull request's head, updated on each push, its outputs posted to
// the pull request, and destroyed (its resources, then the Stack) when
// the pull request closes or merges, or when the template's ttl runs out.
//
// A review stack runs the pull request's program with the template's
// credentials, never a governed Stack's: whoever may push a branch to the
// repository can read what the template gives it. Setting or changing it
// needs the verb "govern" on the Pipeline (spec.pullRequests), and the
// verb "get" on every Secret and ConfigMap the template names (the
// operator's read-check webhook). A review stack is never governed: it
// cannot name a stage, and no stage deploys it.
//
// +kubebuilder:validation:XValidation:rule="!has(self.template.projectRepo) && !has(self.template.commit) && !has(self.template.branch) && !has(self.template.programRef) && !has(self.template.fluxSource)",message="template: the operator sets the source of a review stack (the Pipeline's repository at the pull request's head): leave projectRepo, commit, branch, programRef and fluxSource out"
type ReviewStacks struct {
	// Template is the spec each review stack gets: its backend, config,
	// secrets, credentials, workspace template and ttl. Over it the
	// operator sets the source (projectRepo: the Pipeline's
	// spec.git.repoURL; commit: the pull request's head), the stack's
	// name (the template's stack with "-pr-<number>" added, so that each
	// pull request has a stack of its own in the backend),
	// destroyOnFinalize and removeOnFinalize (true: closing the pull
	// request destroys what it deployed, and removes the stack from the
	// backend). The rest is taken as it is, gitAuth, repoDir and ttl
	// included.
	Template shared.StackSpec `json:"template"`

	// MaxStacks is how many review stacks exist at once, the oldest pull
	// requests first; default 3. A pull request over the limit waits for
	// one to go, and its comment says so.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	MaxStacks int32 `json:"maxStacks,omitempty"`
}

// ReviewStackPhase is where a pull request's review stack is.
type ReviewStackPhase string

const (
	// ReviewStackWaiting: more review stacks exist than maxStacks; this
	// pull request waits for one to go.
	ReviewStackWaiting ReviewStackPhase = "Waiting"
	// ReviewStackDeploying: the Stack is being deployed at the head.
	ReviewStackDeploying ReviewStackPhase = "Deploying"
	// ReviewStackReady: the Stack is deployed at the head; its outputs
	// are posted.
	ReviewStackReady ReviewStackPhase = "Ready"
	// ReviewStackFailed: the Stack could not be deployed at the head (or
	// made at all): the message says why.
	ReviewStackFailed ReviewStackPhase = "Failed"
	// ReviewStackExpired: the Stack's ttl ran out, and it was destroyed;
	// a new push deploys a new one.
	ReviewStackExpired ReviewStackPhase = "Expired"
)

// ReviewStackStatus is what was done for one pull request's review stack.
type ReviewStackStatus struct {
	// Name is the review stack's Stack.
	Name string `json:"name"`

	// UID is the Stack's metadata.uid, as the API server gave it to the
	// Pipeline when it made the Stack: only a Stack under the name with
	// this UID is the review stack, updated and deleted as one.
	// +optional
	UID types.UID `json:"uid,omitempty"`

	// Head is the commit the Stack was last set to.
	// +optional
	Head string `json:"head,omitempty"`

	// Phase is where the review stack is.
	Phase ReviewStackPhase `json:"phase"`

	// Message says what is deployed, or why it waits or failed.
	// +optional
	Message string `json:"message,omitempty"`

	// ExpiresAt is when the Stack's ttl runs out, from its status.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// CommentID is the forge's id of the comment that shows the review
	// stack, edited as it changes.
	// +optional
	CommentID string `json:"commentID,omitempty"`

	// Posted is a digest of what the comment shows, so that it is edited
	// only when that changes.
	// +optional
	Posted string `json:"posted,omitempty"`
}
