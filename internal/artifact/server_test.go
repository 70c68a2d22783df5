package artifact

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/stackyard/stackyard/internal/source"
)

func TestHandler(t *testing.T) {
	s := newStore(t, "http://artifacts.test")
	data := pack(t, "name: web\nruntime: yaml\n")
	if _, err := s.Put(testKey, "1", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(s.Dir(), "program", "default", "web")
	// Planted by someone with access to the disk: a temporary file and a
	// symlink out of the store must never be served.
	if err := os.WriteFile(filepath.Join(dir, tempPrefix+"x"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "secret.tar.gz")
	if err := os.WriteFile(secret, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "9.tar.gz")); err != nil {
		t.Fatal(err)
	}
	h := Handler(s)

	tests := []struct {
		name       string
		method     string
		target     string
		header     http.Header
		wantStatus int
		wantBody   []byte
	}{
		{name: "get", method: http.MethodGet, target: "/program/default/web/1.tar.gz", wantStatus: http.StatusOK, wantBody: data},
		{name: "head", method: http.MethodHead, target: "/program/default/web/1.tar.gz", wantStatus: http.StatusOK, wantBody: []byte{}},
		{name: "range", method: http.MethodGet, target: "/program/default/web/1.tar.gz", header: http.Header{"Range": {"bytes=0-1"}}, wantStatus: http.StatusPartialContent, wantBody: data[:2]},
		{name: "post", method: http.MethodPost, target: "/program/default/web/1.tar.gz", wantStatus: http.StatusMethodNotAllowed},
		{name: "missing revision", method: http.MethodGet, target: "/program/default/web/2.tar.gz", wantStatus: http.StatusNotFound},
		{name: "missing object", method: http.MethodGet, target: "/program/default/nope/1.tar.gz", wantStatus: http.StatusNotFound},
		{name: "root", method: http.MethodGet, target: "/", wantStatus: http.StatusNotFound},
		{name: "directory", method: http.MethodGet, target: "/program/default/web", wantStatus: http.StatusNotFound},
		{name: "temporary file", method: http.MethodGet, target: "/program/default/web/" + tempPrefix + "x", wantStatus: http.StatusNotFound},
		{name: "symlink out of the store", method: http.MethodGet, target: "/program/default/web/9.tar.gz", wantStatus: http.StatusNotFound},
		{name: "dot-dot", method: http.MethodGet, target: "/program/default/../../../etc/passwd", wantStatus: http.StatusNotFound},
		{name: "dot-dot to a real file", method: http.MethodGet, target: "/program/x/../default/web/1.tar.gz", wantStatus: http.StatusNotFound},
		{name: "encoded slashes", method: http.MethodGet, target: "/program/default/web/..%2F..%2F..%2F1.tar.gz", wantStatus: http.StatusNotFound},
		{name: "encoded dot-dot segment", method: http.MethodGet, target: "/program/%2e%2e/web/1.tar.gz", wantStatus: http.StatusNotFound},
		{name: "double slash", method: http.MethodGet, target: "//program/default/web/1.tar.gz", wantStatus: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.target, nil)
			for k, v := range tt.header {
				req.Header[k] = v
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus {
				t.Fatalf("%s %s: status %d, want %d", tt.method, tt.target, rec.Code, tt.wantStatus)
			}
			if tt.wantBody != nil && !bytes.Equal(rec.Body.Bytes(), tt.wantBody) {
				t.Errorf("body of %d bytes, want %d", rec.Body.Len(), len(tt.wantBody))
			}
			if tt.wantStatus == http.StatusOK && rec.Header().Get("Content-Type") != "application/gzip" {
				t.Errorf("Content-Type = %q", rec.Header().Get("Content-Type"))
			}
			if bytes.Contains(rec.Body.Bytes(), []byte("secret")) || bytes.Contains(rec.Body.Bytes(), []byte("partial")) {
				t.Error("served a file it must not")
			}
		})
	}
}

// startServer runs a Server for a new store on a loopback port until the
// test ends, and returns the store, advertised at the server's address.
func startServer(t *testing.T) *Store {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t, LocalURL(ln.Addr()))
	srv := NewServer(s, ln, logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Start returned %v after its context ended", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("the server did not stop")
		}
	})
	return s
}

func TestServerWithFetchArtifact(t *testing.T) {
	s := startServer(t)
	data, err := Pack(map[string][]byte{"app/Pulumi.yaml": []byte("name: web\nruntime: yaml\n")})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Put(testKey, "5", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "src")
	res, err := source.FetchArtifact(context.Background(), target, source.ArtifactSpec{URL: a.URL, Digest: a.Digest, Dir: "app"})
	if err != nil {
		t.Fatalf("FetchArtifact(%s): %v", a.URL, err)
	}
	got, err := os.ReadFile(filepath.Join(res.Dir, "Pulumi.yaml"))
	if err != nil || string(got) != "name: web\nruntime: yaml\n" {
		t.Errorf("Pulumi.yaml = %q, %v", got, err)
	}
}

func TestServerServesWhileReplacing(t *testing.T) {
	s := startServer(t)
	versions := [][]byte{
		pack(t, strings.Repeat("a", 200_000)),
		pack(t, strings.Repeat("b", 300_000)),
	}
	digests := map[string]bool{}
	for _, v := range versions {
		d, _, _ := Digest(bytes.NewReader(v))
		digests[d] = true
	}
	a, err := s.Put(testKey, "1", bytes.NewReader(versions[0]))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.Put(testKey, "1", bytes.NewReader(versions[i%2])); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var readers sync.WaitGroup
	for range 8 {
		readers.Go(func() {
			for range 20 {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.URL, nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				d, _, err := Digest(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || !digests[d] {
					t.Errorf("GET: status %d, digest %s, %v: a torn or missing artifact", resp.StatusCode, d, err)
					return
				}
			}
		})
	}
	readers.Wait()
	close(stop)
	wg.Wait()
}

func TestLocalURL(t *testing.T) {
	tests := []struct {
		addr string
		want string
	}{
		{addr: "127.0.0.1:9090", want: "http://127.0.0.1:9090"},
		{addr: "0.0.0.0:9090", want: "http://127.0.0.1:9090"},
		{addr: "[::]:9090", want: "http://127.0.0.1:9090"},
		{addr: "[::1]:9090", want: "http://[::1]:9090"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			addr, err := net.ResolveTCPAddr("tcp", tt.addr)
			if err != nil {
				t.Fatal(err)
			}
			if got := LocalURL(addr); got != tt.want {
				t.Errorf("LocalURL(%s) = %q, want %q", tt.addr, got, tt.want)
			}
		})
	}
}
