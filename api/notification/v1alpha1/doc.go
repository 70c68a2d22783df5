// Package v1alpha1 holds the notification.stackyard.dev/v1alpha1 API: what
// tells stackyard about the world, and what stackyard tells the world.
//
//   - A Receiver is an endpoint a forge (GitHub, GitLab, Gitea/Forgejo,
//     Bitbucket) or any system that can sign a request calls on a push. A
//     verified push wakes, at once, the Pipelines and the branch-tracking
//     Stacks of the Receiver's namespace that follow the pushed repository
//     and branch, instead of waiting for their next poll.
//   - A Provider is where notifications go: a generic webhook, Slack,
//     Microsoft Teams, or a forge's commit statuses (Gitea, GitHub,
//     GitLab), with the Secret that holds its credentials.
//   - An Alert chooses which events of its namespace (releases discovered,
//     promotions waiting for approval, succeeded or failed, failed
//     verifications, rollbacks, stalled Stacks, drift) go to which
//     Provider, each delivered at least once.
//
// The objects are namespaced: a team configures its own, and a Receiver
// never wakes an object of another namespace, nor does an Alert report one.
//
// +kubebuilder:object:generate=true
// +groupName=notification.stackyard.dev
package v1alpha1
