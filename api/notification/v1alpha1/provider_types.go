package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProviderType is where a Provider sends notifications, and in which
// format.
//
// +kubebuilder:validation:Enum=webhook;slack;teams;gitea;github;gitlab
type ProviderType string

const (
	// ProviderWebhook posts stackyard's own JSON event to spec.address,
	// signed in the header X-Signature: "sha256=" and the hex
	// HMAC-SHA256 of the body with the Secret's token (when there is one).
	ProviderWebhook ProviderType = "webhook"
	// ProviderSlack posts a Slack incoming-webhook message ({"text": …}),
	// which Mattermost and Rocket.Chat accept too.
	ProviderSlack ProviderType = "slack"
	// ProviderTeams posts a Microsoft Teams incoming-webhook MessageCard.
	ProviderTeams ProviderType = "teams"
	// ProviderGitea sets a commit status on a Gitea or Forgejo repository.
	ProviderGitea ProviderType = "gitea"
	// ProviderGitHub sets a commit status on a GitHub repository.
	ProviderGitHub ProviderType = "github"
	// ProviderGitLab sets a commit status on a GitLab project.
	ProviderGitLab ProviderType = "gitlab"
)

// Keys of the Secret a Provider names.
const (
	// ProviderAddressKey overrides spec.address, so that an address with
	// a token in it (a Slack or Teams webhook URL) stays in a Secret.
	ProviderAddressKey = "address"
	// ProviderTokenKey is the HMAC key of a webhook Provider, and the API
	// token of a commit-status Provider.
	ProviderTokenKey = "token"
)

// ProviderSpec says where notifications go and with which credentials.
//
// +kubebuilder:validation:XValidation:rule="!(self.type in ['gitea', 'github', 'gitlab']) || has(self.secretRef)",message="secretRef: a commit-status provider needs a Secret with its API token",fieldPath=".secretRef"
type ProviderSpec struct {
	// Type is the kind of endpoint: webhook, slack, teams (chat and
	// generic JSON) or gitea, github, gitlab (commit statuses).
	Type ProviderType `json:"type"`

	// Address is the URL notifications are sent to (http or https). For
	// gitea, github and gitlab it is the API's base URL (e.g.
	// https://api.github.com, https://gitlab.example.com/api/v4,
	// https://gitea.example.com/api/v1), and the repository is the one
	// of the Release's Pipeline; it defaults to https://api.github.com
	// for github and https://gitlab.com/api/v4 for gitlab. The key
	// "address" of the Secret, when set, takes precedence, and is never
	// shown in status.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://')",message="address: must be an http:// or https:// URL"
	Address string `json:"address,omitempty"`

	// SecretRef names a Secret of the Provider's namespace with the keys
	// "address" (optional, overrides spec.address) and "token" (the
	// webhook's HMAC key, or the forge's API token: required for gitea,
	// github and gitlab). The operator reads it with its own rights and
	// sends its values only to the Provider's address.
	// +optional
	SecretRef *SecretReference `json:"secretRef,omitempty"`
}

// Provider is an endpoint Alerts send notifications to: a chat webhook,
// a generic JSON webhook, or a forge's commit-status API. It is
// configuration only; an Alert that uses it reports whether delivery
// works.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=syprovider,categories=stackyard
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Provider struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says where and how to send.
	Spec ProviderSpec `json:"spec"`
}

// ProviderList is a list of Providers.
//
// +kubebuilder:object:root=true
type ProviderList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Providers.
	Items []Provider `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Provider{}, &ProviderList{})
}
