package auth_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stackyard/stackyard/internal/agent/auth"
)

func TestStaticToken(t *testing.T) {
	cases := []struct {
		name       string
		configured string
		presented  string
		want       codes.Code
	}{
		{name: "right token", configured: rightToken, presented: rightToken, want: codes.OK},
		{name: "wrong token", configured: rightToken, presented: "wrong", want: codes.Unauthenticated},
		{name: "prefix of the token", configured: rightToken, presented: rightToken[:5], want: codes.Unauthenticated},
		{name: "token with a suffix", configured: rightToken, presented: rightToken + "x", want: codes.Unauthenticated},
		{name: "empty token", configured: rightToken, presented: "", want: codes.Unauthenticated},
		{name: "unconfigured refuses empty", configured: "", presented: "", want: codes.Unauthenticated},
		{name: "unconfigured refuses anything", configured: "", presented: "x", want: codes.Unauthenticated},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := auth.NewStaticToken(tc.configured).Authorize(context.Background(), tc.presented)
			if got := status.Code(err); got != tc.want {
				t.Fatalf("code = %v (%v), want %v", got, err, tc.want)
			}
		})
	}
}

func TestStaticTokenDoesNotPrintTheToken(t *testing.T) {
	a := auth.NewStaticToken(rightToken)
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(format, a); strings.Contains(s, rightToken) {
			t.Fatalf("%s prints the token: %s", format, s)
		}
	}
}

func TestGenerateToken(t *testing.T) {
	seen := map[string]bool{}
	for range 16 {
		tok, err := auth.GenerateToken()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil {
			t.Fatalf("%q is not unpadded URL-safe base64: %v", tok, err)
		}
		if len(raw) != 32 {
			t.Fatalf("token carries %d bytes, want 32", len(raw))
		}
		if seen[tok] {
			t.Fatal("GenerateToken repeated itself")
		}
		seen[tok] = true
	}
}
