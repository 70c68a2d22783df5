// Package auth authenticates and authorises the gRPC calls that the operator
// makes to a workspace agent.
//
// Every RPC carries a bearer token in the "authorization" metadata key
// ("authorization: Bearer <token>"). The server side installs
// UnaryInterceptor and StreamInterceptor, which extract that token and hand
// it to an Authorizer; the client side attaches it with BearerToken.
//
// Two Authorizers exist, one per runtime:
//
//   - NewStaticToken serves the local runtime, where the agent is a
//     subprocess on the operator's host. The operator generates a random
//     per-workspace secret with GenerateToken, passes it to the agent at
//     start-up, and the agent compares each presented token with it in
//     constant time.
//   - NewKubernetes serves agents running in a cluster. The caller presents
//     a service-account token bound to the workspace's audience (see
//     WorkspaceAudience); the agent verifies it with a TokenReview and then
//     asks the API server, with a SubjectAccessReview, whether that identity
//     may "use" the "workspaces/rpc" subresource of this very workspace in
//     the "auto.pulumi.com" group. These are the audience and attributes the
//     Pulumi Kubernetes Operator v2 uses, so RBAC written for it applies
//     unchanged.
//
// Tokens are secrets: nothing in this package puts one in a log line, an
// error or a cache key (caches are keyed by a SHA-256 digest).
package auth
