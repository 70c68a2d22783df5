package auth

import (
	"context"

	"google.golang.org/grpc/credentials"
)

// BearerToken returns per-RPC credentials that send
// "authorization: Bearer <token>" with every call; a client installs them
// with grpc.WithPerRPCCredentials.
//
// They do not require transport security, so they work over a plaintext
// connection. That is a deliberate trade-off: the agent listens either on
// loopback (local runtime) or on the pod network (in a cluster), where
// stackyard does not provision serving certificates. The price is that
// anyone who can observe that traffic can read and replay the token. The
// risk is bounded by what the tokens are: a static token is random, scoped to
// one workspace and dies with the agent process, and a Kubernetes token is
// short-lived and bound to one workspace's audience, so it is useless against
// the API server or any other workspace. Clusters that need confidentiality
// on the pod network should encrypt it (a CNI or mesh with mTLS).
func BearerToken(token string) credentials.PerRPCCredentials {
	return bearerToken{token: token}
}

// bearerToken implements credentials.PerRPCCredentials. Its String and
// GoString methods keep the token out of anything that formats it.
type bearerToken struct {
	token string
}

// GetRequestMetadata returns the authorization header for one call.
func (b bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{authorizationKey: bearerScheme + " " + b.token}, nil
}

// RequireTransportSecurity reports false: see BearerToken for why.
func (bearerToken) RequireTransportSecurity() bool { return false }

// String hides the token when the credentials are printed.
func (bearerToken) String() string { return "BearerToken([redacted])" }

// GoString hides the token when the credentials are printed with %#v.
func (b bearerToken) GoString() string { return b.String() }
