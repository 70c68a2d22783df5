package auth_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/stackyard/stackyard/internal/agent/auth"
)

const rightToken = "right-token-0123456789"

// authorizerFunc adapts a function to auth.Authorizer.
type authorizerFunc func(ctx context.Context, token string) error

func (f authorizerFunc) Authorize(ctx context.Context, token string) error { return f(ctx, token) }

// fakeStream is the part of a server stream the interceptor touches.
type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s fakeStream) Context() context.Context { return s.ctx }

func TestInterceptors(t *testing.T) {
	static := auth.NewStaticToken(rightToken)
	cases := []struct {
		name       string
		md         metadata.MD // nil: no incoming metadata at all
		authorizer auth.Authorizer
		want       codes.Code
	}{
		{name: "no metadata", md: nil, want: codes.Unauthenticated},
		{name: "no authorization key", md: metadata.Pairs("x-other", "v"), want: codes.Unauthenticated},
		{name: "empty value", md: metadata.Pairs("authorization", ""), want: codes.Unauthenticated},
		{name: "wrong scheme", md: metadata.Pairs("authorization", "Basic "+rightToken), want: codes.Unauthenticated},
		{name: "scheme without token", md: metadata.Pairs("authorization", "Bearer"), want: codes.Unauthenticated},
		{name: "scheme with blank token", md: metadata.Pairs("authorization", "Bearer   "), want: codes.Unauthenticated},
		{name: "token with inner space", md: metadata.Pairs("authorization", "Bearer "+rightToken+" x"), want: codes.Unauthenticated},
		{name: "bare token", md: metadata.Pairs("authorization", rightToken), want: codes.Unauthenticated},
		{name: "two values", md: metadata.Pairs("authorization", "Bearer "+rightToken, "authorization", "Bearer "+rightToken), want: codes.Unauthenticated},
		{name: "wrong token", md: metadata.Pairs("authorization", "Bearer wrong-token"), want: codes.Unauthenticated},
		{name: "right token", md: metadata.Pairs("authorization", "Bearer "+rightToken), want: codes.OK},
		{name: "scheme is case-insensitive", md: metadata.Pairs("authorization", "bearer "+rightToken), want: codes.OK},
		{
			name: "permission denied passes through",
			md:   metadata.Pairs("authorization", "Bearer "+rightToken),
			authorizer: authorizerFunc(func(context.Context, string) error {
				return status.Error(codes.PermissionDenied, "not you")
			}),
			want: codes.PermissionDenied,
		},
		{
			name: "plain error fails closed",
			md:   metadata.Pairs("authorization", "Bearer "+rightToken),
			authorizer: authorizerFunc(func(_ context.Context, token string) error {
				return errors.New("boom: " + token)
			}),
			want: codes.Unauthenticated,
		},
		{
			name: "token echoed by an authorizer is redacted",
			md:   metadata.Pairs("authorization", "Bearer "+rightToken),
			authorizer: authorizerFunc(func(_ context.Context, token string) error {
				return status.Error(codes.Unavailable, "cannot check "+token)
			}),
			want: codes.Unavailable,
		},
	}
	for _, tc := range cases {
		a := tc.authorizer
		if a == nil {
			a = static
		}
		ctx := context.Background()
		if tc.md != nil {
			ctx = metadata.NewIncomingContext(ctx, tc.md)
		}

		t.Run("unary/"+tc.name, func(t *testing.T) {
			called := false
			_, err := auth.UnaryInterceptor(a)(ctx, "req", &grpc.UnaryServerInfo{FullMethod: "/x/y"},
				func(context.Context, any) (any, error) { called = true; return "resp", nil })
			check(t, err, called, tc.want)
		})
		t.Run("stream/"+tc.name, func(t *testing.T) {
			called := false
			err := auth.StreamInterceptor(a)(nil, fakeStream{ctx: ctx}, &grpc.StreamServerInfo{FullMethod: "/x/y"},
				func(any, grpc.ServerStream) error { called = true; return nil })
			check(t, err, called, tc.want)
		})
	}
}

func check(t *testing.T, err error, called bool, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("code = %v (%v), want %v", got, err, want)
	}
	if called != (want == codes.OK) {
		t.Fatalf("handler called = %v, want %v", called, want == codes.OK)
	}
	if err != nil && strings.Contains(err.Error(), rightToken) {
		t.Fatalf("error leaks the token: %v", err)
	}
}

func TestInterceptorsRejectNilAuthorizer(t *testing.T) {
	for name, build := range map[string]func(){
		"unary":  func() { auth.UnaryInterceptor(nil) },
		"stream": func() { auth.StreamInterceptor(nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic for a nil Authorizer")
				}
			}()
			build()
		})
	}
}
