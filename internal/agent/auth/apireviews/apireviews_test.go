package apireviews

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// serve starts an HTTPS server answering with h and returns Reviews of it
// with a token file holding "agent-token".
func serve(t *testing.T, h http.HandlerFunc) (*Reviews, *httptest.Server) {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	caFile, tokenFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token")
	if err := os.WriteFile(caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte("agent-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Server: srv.URL, TokenFile: tokenFile, CAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	return r, srv
}

// TestRefusals: what the API server refuses comes back as the error
// client-go would give, a redirect is not followed, and no error holds a
// token.
func TestRefusals(t *testing.T) {
	const reviewed = "the-reviewed-token"
	var elsewhere atomic.Int32
	other := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(other.Close)

	for name, tc := range map[string]struct {
		h    http.HandlerFunc
		want func(error) bool
	}{
		"a Status": {func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer agent-token" || r.URL.Path != "/apis/authentication.k8s.io/v1/tokenreviews" {
				http.Error(w, "wrong request", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"tokenreviews is forbidden"}`))
		}, apierrors.IsForbidden},
		"no Status": {func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "upstream connect error, echoing "+reviewed, http.StatusServiceUnavailable)
		}, apierrors.IsServiceUnavailable},
		"a redirect": {func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
		}, func(err error) bool { return err != nil }},
	} {
		t.Run(name, func(t *testing.T) {
			r, _ := serve(t, tc.h)
			_, err := r.CreateTokenReview(context.Background(), &authenticationv1.TokenReview{
				Spec: authenticationv1.TokenReviewSpec{Token: reviewed},
			})
			if !tc.want(err) {
				t.Fatalf("error %v (%T)", err, err)
			}
			if strings.Contains(err.Error(), reviewed) || strings.Contains(err.Error(), "agent-token") {
				t.Errorf("the error holds a token: %v", err)
			}
		})
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect was followed %d times, with the reviewed token in its body", n)
	}
}
