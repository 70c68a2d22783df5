package auth

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Authorizer decides whether the holder of a bearer token may call the
// agent. It is the single seam between the transport (the interceptors) and
// the policy (a static secret, or the Kubernetes API), so the agent server
// does not need to know which runtime it is deployed by.
//
// Authorize returns nil to let the call through. Otherwise it returns a gRPC
// status error: codes.Unauthenticated when the token is missing, malformed or
// not valid for this workspace, and codes.PermissionDenied when the token
// names a real identity that is not allowed to use the workspace. An
// implementation may also return codes.Unavailable or codes.Internal when it
// could not reach a decision at all (for example, the API server is down).
// Errors must never contain the token. The interceptors remove it from
// whatever an Authorizer returns all the same, and the Kubernetes
// authorizer from the client-go errors it quotes: text from elsewhere
// cannot be proven free of it.
type Authorizer interface {
	Authorize(ctx context.Context, token string) error
}

// errUnauthenticated and errPermissionDenied build the two status errors an
// Authorizer returns for a decided refusal.
func errUnauthenticated(msg string) error {
	return status.Error(codes.Unauthenticated, msg)
}
