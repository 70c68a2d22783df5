package auth

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stackyard/stackyard/internal/redact"
)

// authorizationKey is the metadata key that carries the credentials; gRPC
// lower-cases metadata keys, so this matches "Authorization" too.
const authorizationKey = "authorization"

// bearerScheme is the HTTP authentication scheme (RFC 6750) the agent
// accepts. Schemes compare case-insensitively.
const bearerScheme = "Bearer"

// UnaryInterceptor returns a server interceptor that rejects every unary RPC
// whose bearer token a does not accept, before the handler runs. Install it
// with grpc.ChainUnaryInterceptor so that no method, including health and
// reflection services, is reachable without a token. It panics if a is nil.
func UnaryInterceptor(a Authorizer) grpc.UnaryServerInterceptor {
	mustHave(a)
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := authorize(ctx, a); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamInterceptor returns a server interceptor that rejects every
// streaming RPC whose bearer token a does not accept, before the handler
// runs. It checks the token once, when the stream opens; a long-lived stream
// is not re-authorised while it lasts. It panics if a is nil.
func StreamInterceptor(a Authorizer) grpc.StreamServerInterceptor {
	mustHave(a)
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := authorize(ss.Context(), a); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// mustHave panics on a nil Authorizer, so that a server wired without a
// policy fails when it is built rather than on its first call.
func mustHave(a Authorizer) {
	if a == nil {
		panic("auth: nil Authorizer")
	}
}

// authorize extracts the bearer token from ctx and asks a about it. It makes
// sure that whatever a returns reaches the client as a gRPC status error,
// failing closed: an error that carries no status becomes Unauthenticated,
// and its text (which the package cannot vouch for) is not sent.
func authorize(ctx context.Context, a Authorizer) error {
	token, err := bearerTokenFromContext(ctx)
	if err != nil {
		return err
	}
	err = a.Authorize(ctx, token)
	if err == nil {
		return nil
	}
	s, ok := status.FromError(err)
	if !ok || s.Code() == codes.OK {
		return errUnauthenticated("unauthenticated")
	}
	return status.Error(s.Code(), redact.New(token).Redact(s.Message()))
}

// bearerTokenFromContext returns the token of the single
// "authorization: Bearer <token>" entry in the incoming metadata, or an
// Unauthenticated status that says what is wrong without echoing the value.
func bearerTokenFromContext(ctx context.Context) (string, error) {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return "", errUnauthenticated("missing authorization metadata")
	}
	values := md.Get(authorizationKey)
	switch len(values) {
	case 0:
		return "", errUnauthenticated("missing authorization metadata")
	case 1:
	default:
		return "", errUnauthenticated("more than one authorization value")
	}
	scheme, token, found := strings.Cut(values[0], " ")
	if !found || !strings.EqualFold(scheme, bearerScheme) {
		return "", errUnauthenticated("authorization scheme must be Bearer")
	}
	token = strings.TrimLeft(token, " ")
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		return "", errUnauthenticated("malformed bearer token")
	}
	return token, nil
}
