package verify

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestRestricted(t *testing.T) {
	for addr, want := range map[string]bool{
		"169.254.169.254":        true,
		"169.254.0.1":            true,
		"fe80::1":                true,
		"::ffff:169.254.169.254": true,
		"100.100.100.200":        true,
		"fd00:ec2::254":          true,
		"127.0.0.1":              false,
		"10.0.0.1":               false,
		"8.8.8.8":                false,
		"::1":                    false,
	} {
		if got := restricted(netip.MustParseAddr(addr)); got != want {
			t.Errorf("restricted(%s) = %v, want %v", addr, got, want)
		}
	}
}

// TestHTTPClientRefusesMetadata: the metadata address is refused before
// any packet leaves, and allowed only with allowLinkLocal.
func TestHTTPClientRefusesMetadata(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://169.254.169.254/latest/meta-data/", nil)
	_, err := NewHTTPClient(false).Do(req)
	if !errors.Is(err, ErrRestrictedAddress) {
		t.Fatalf("got %v, want %v", err, ErrRestrictedAddress)
	}
	// With leave, the client tries (and, here, times out or is refused by
	// the network: anything but the restriction).
	_, err = NewHTTPClient(true).Do(req.Clone(ctx))
	if errors.Is(err, ErrRestrictedAddress) {
		t.Fatalf("allowLinkLocal: got %v", err)
	}
}

// TestHTTPClientRedirects: a redirect on the same host is followed, one
// to another host (here the same server under another name) is not.
func TestHTTPClientRedirects(t *testing.T) {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/same":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/other":
			http.Redirect(w, r, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)+"/ok", http.StatusFound)
		default:
			_, _ = w.Write([]byte(`{"ok":true}`))
		}
	}))
	defer srv.Close()
	client := NewHTTPClient(false)
	resp, err := client.Get(srv.URL + "/same")
	if err != nil {
		t.Fatalf("a redirect on the same host: %v", err)
	}
	resp.Body.Close()
	_, err = client.Get(srv.URL + "/other")
	if err == nil || !strings.Contains(err.Error(), "refusing to follow a redirect") {
		t.Fatalf("a redirect to another host: got %v, want it refused", err)
	}
}
