package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReceiverType is the format a Receiver accepts, and how it checks that a
// request comes from who holds its secret.
//
// +kubebuilder:validation:Enum=github;gitlab;gitea;bitbucket;generic
type ReceiverType string

const (
	// ReceiverGitHub accepts GitHub's push events, signed in
	// X-Hub-Signature-256 (HMAC-SHA256 of the body with the token).
	ReceiverGitHub ReceiverType = "github"
	// ReceiverGitLab accepts GitLab's push and tag push events, whose
	// X-Gitlab-Token header carries the token.
	ReceiverGitLab ReceiverType = "gitlab"
	// ReceiverGitea accepts Gitea's and Forgejo's push events, signed in
	// X-Gitea-Signature (or X-Forgejo-Signature).
	ReceiverGitea ReceiverType = "gitea"
	// ReceiverBitbucket accepts Bitbucket Cloud's repo:push events, signed
	// in X-Hub-Signature.
	ReceiverBitbucket ReceiverType = "bitbucket"
	// ReceiverGeneric accepts {"repository": URL, "ref": "refs/heads/…"},
	// signed in X-Signature as "sha256=" and the hex HMAC-SHA256 of the
	// body with the token.
	ReceiverGeneric ReceiverType = "generic"
)

// WakeRequestPrefix begins the value a Receiver sets in the
// pulumi.com/reconciliation-request annotation of the objects a push
// wakes ("receiver/<receiver>/<time>"): an object carrying it has a
// Receiver, and polls less often.
const WakeRequestPrefix = "receiver/"

// HeardSlowdown is how much longer a Pipeline woken by a Receiver waits
// between polls than its spec.interval: polling stays as the fallback.
const HeardSlowdown = 4

// ReceiverTokenKey is the key of the token in the Secret a Receiver names.
const ReceiverTokenKey = "token"

// ReceiverSpec says which format a Receiver accepts and with which secret.
type ReceiverSpec struct {
	// Type is the format of the requests: github, gitlab, gitea,
	// bitbucket or generic.
	Type ReceiverType `json:"type"`

	// SecretRef names a Secret of the Receiver's namespace whose key
	// "token" is the webhook secret the forge signs with (or sends, for
	// GitLab). The same token makes the Receiver's path.
	SecretRef SecretReference `json:"secretRef"`
}

// SecretReference names a Secret in the same namespace.
type SecretReference struct {
	// Name is the Secret's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ReceiverStatus says where to send requests, and what was heard.
type ReceiverStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are Ready, Reconciling and Stalled (kstatus).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// WebhookPath is the path, on the operator's receiver endpoint, to
	// give the forge: "/hook/" and a digest of the token, the name and
	// the namespace, which tells nobody which objects exist.
	// +optional
	WebhookPath string `json:"webhookPath,omitempty"`

	// LastHeard is when the Receiver last accepted a request.
	// +optional
	LastHeard *metav1.Time `json:"lastHeard,omitempty"`
}

// Receiver is an endpoint a forge calls on a push: a verified push wakes
// the Pipelines and branch-tracking Stacks of the namespace that follow the
// pushed repository and branch (tag pushes: the Pipelines that release
// tags), so that they look at once rather than at their next poll.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=syreceiver,categories=stackyard
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Path",type=string,JSONPath=`.status.webhookPath`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Receiver struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says what the Receiver accepts.
	Spec ReceiverSpec `json:"spec"`
	// Status says where it listens and what it heard.
	Status ReceiverStatus `json:"status,omitempty"`
}

// ReceiverList is a list of Receivers.
//
// +kubebuilder:object:root=true
type ReceiverList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Receivers.
	Items []Receiver `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Receiver{}, &ReceiverList{})
}
