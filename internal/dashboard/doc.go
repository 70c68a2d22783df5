// Package dashboard serves stackyard's web dashboard from the operator: which
// release runs in which stage, with health; the promotions waiting for a
// person; each release's way through the stages; every Stack; and the audit
// trail. People act from it (approve, reject, promote, roll back, ask a Stack
// to reconcile) as themselves.
//
// The pages are rendered on the server from the manager's cache (Go
// templates and a little JavaScript, all embedded, nothing from a CDN). A
// page follows the cluster live: informer events reach it as server-sent
// events, and it fetches its own content again.
//
// Sign-in is a bearer token that the API server accepts (a TokenReview says
// who it is): a ServiceAccount token pasted on the sign-in page, or, behind
// oauth2-proxy, the OIDC ID token it passes in the Authorization header.
// Reads are limited to the namespaces where the user may list the kind
// shown (SubjectAccessReview); actions are sent to the API server with the
// user's own token, so RBAC and the admission policies judge them exactly as
// they judge kubectl and the CLI, and the operator needs no right to
// impersonate anyone. Every action needs the page's CSRF token.
package dashboard
