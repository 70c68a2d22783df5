package forge

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/stackyard/stackyard/test/testenv"
)

// TestGiteaStartsAgainOnATakenAddress gives Gitea first an address another
// process listens on, as when a port FreeAddr found free is taken before
// Gitea binds it: Gitea is started again on another address and serves.
func TestGiteaStartsAgainOnATakenAddress(t *testing.T) {
	taken, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	var given []string
	addrs := func(t testing.TB) string {
		addr := testenv.FreeAddr(t)
		if len(given) == 0 {
			addr = taken.Addr().String()
		}
		given = append(given, addr)
		return addr
	}
	g := startGitea(t, addrs)
	if len(given) != 2 || g.URL != "http://"+given[1] {
		t.Fatalf("addresses given %v, Gitea at %s; want it started again on the second", given, g.URL)
	}
	resp, err := http.Get(g.URL + "/api/v1/version")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/version: %s", resp.Status)
	}
}
