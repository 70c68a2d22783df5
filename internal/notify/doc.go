// Package notify turns the events an Alert reports into requests to its
// Provider: stackyard's own signed JSON (webhook), a Slack-compatible
// message (slack), a Microsoft Teams MessageCard (teams), or a commit
// status on Gitea/Forgejo, GitHub or GitLab.
//
// Requests leave with the operator's network position, to an address a
// namespace's user wrote: they go through verify.NewHTTPClient, which
// refuses link-local and cloud metadata addresses and never follows a
// redirect to another host, each bounded by Timeout. An error never holds
// the token, nor the address when it came from a Secret.
package notify
