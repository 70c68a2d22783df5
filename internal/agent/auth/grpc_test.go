package auth_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/stackyard/stackyard/internal/agent/auth"
)

// startHealthServer serves the standard health service on a loopback port
// behind the interceptors and returns its address.
func startHealthServer(t *testing.T, a auth.Authorizer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(auth.UnaryInterceptor(a)),
		grpc.ChainStreamInterceptor(auth.StreamInterceptor(a)),
	)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func dial(t *testing.T, addr string, opts ...grpc.DialOption) healthpb.HealthClient {
	t.Helper()
	opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func TestHealthOverLoopback(t *testing.T) {
	token, err := auth.GenerateToken()
	if err != nil {
		t.Fatal(err)
	}
	addr := startHealthServer(t, auth.NewStaticToken(token))

	cases := []struct {
		name string
		opts []grpc.DialOption
		want codes.Code
	}{
		{name: "no credentials", want: codes.Unauthenticated},
		{name: "wrong token", opts: []grpc.DialOption{grpc.WithPerRPCCredentials(auth.BearerToken("not-" + token))}, want: codes.Unauthenticated},
		{name: "right token", opts: []grpc.DialOption{grpc.WithPerRPCCredentials(auth.BearerToken(token))}, want: codes.OK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := dial(t, addr, tc.opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			// Unary path.
			resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
			if got := status.Code(err); got != tc.want {
				t.Fatalf("Check: code = %v (%v), want %v", got, err, tc.want)
			}
			if err == nil && resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("Check: status = %v, want SERVING", resp.GetStatus())
			}
			if err != nil && strings.Contains(err.Error(), token) {
				t.Fatalf("Check: error leaks the token: %v", err)
			}

			// Streaming path: the refusal arrives with the first receive.
			stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
			if err == nil {
				var msg *healthpb.HealthCheckResponse
				msg, err = stream.Recv()
				if err == nil && msg.GetStatus() != healthpb.HealthCheckResponse_SERVING {
					t.Fatalf("Watch: status = %v, want SERVING", msg.GetStatus())
				}
			}
			if got := status.Code(err); got != tc.want {
				t.Fatalf("Watch: code = %v (%v), want %v", got, err, tc.want)
			}
		})
	}
}

func TestBearerToken(t *testing.T) {
	creds := auth.BearerToken(rightToken)
	md, err := creds.GetRequestMetadata(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := md["authorization"], "Bearer "+rightToken; got != want {
		t.Fatalf("authorization = %q, want %q", got, want)
	}
	if creds.RequireTransportSecurity() {
		t.Fatal("RequireTransportSecurity = true, want false (plaintext loopback and pod network)")
	}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(format, creds); strings.Contains(s, rightToken) {
			t.Fatalf("%s prints the token: %s", format, s)
		}
	}
}
