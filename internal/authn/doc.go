// Package authn answers, for the operator's HTTP servers (the cloud API and
// the dashboard), who a caller is and what they may do, by asking the API
// server itself: a TokenReview for a bearer token, a SubjectAccessReview for
// a verb on a resource. Kubernetes RBAC therefore judges a request the same
// way whichever door it comes through (kubectl, the CLI, the dashboard, an
// analysis job).
package authn
