// Package gitserver runs a real git server on loopback for tests.
//
// It serves bare repositories through the git CLI's own smart-HTTP
// implementation (git http-backend behind net/http/cgi), so clients talk to
// the same protocol code a production git host speaks, optionally behind
// HTTP basic auth. An SSH front end (see ssh.go) serves the same
// repositories to key-authenticated clients.
package gitserver

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/cgi" //nolint:gosec // git's http-backend, the tests' git server; Go is far past the Httpoxy fix
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// AuthFunc decides whether a request carrying HTTP basic credentials may use
// the server; ok reports whether the request carried credentials at all.
type AuthFunc func(username, password string, ok bool) bool

// Server is a smart-HTTP git server rooted in a temporary directory of bare
// repositories. It is stopped and removed when the test ends.
type Server struct {
	// URL is the server's base address, e.g. "http://127.0.0.1:41234";
	// a repository named "app" is served at URL + "/app.git".
	URL string
	// Root is the directory that holds the bare repositories.
	Root string

	t        testing.TB
	httpSrv  *httptest.Server
	mu       sync.Mutex
	auth     AuthFunc
	outage   bool
	requests map[string]Requests
}

// Requests counts what clients asked of one repository, in any version
// of the git protocol.
type Requests struct {
	// RefLists are the times the server listed the repository's refs:
	// one per `git ls-remote`, and one at the start of every fetch or
	// clone.
	RefLists int
	// Fetches are the times the server sent objects: one per fetch or
	// clone (more when negotiation takes rounds).
	Fetches int
}

// LsRemotes returns the ref listings that were not part of a fetch.
func (r Requests) LsRemotes() int { return r.RefLists - r.Fetches }

// New starts a server on a loopback port with no authentication and
// registers its shutdown with t.Cleanup.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, Root: t.TempDir()}
	backend := &cgi.Handler{
		Path: httpBackendPath(t),
		Env: append(gitEnv(),
			"GIT_PROJECT_ROOT="+s.Root,
			"GIT_HTTP_EXPORT_ALL=1",
		),
		Stderr: testLogWriter{t},
	}
	s.httpSrv = httptest.NewServer(s.guard(backend))
	s.URL = s.httpSrv.URL
	t.Cleanup(s.httpSrv.Close)
	return s
}

// SetBasicAuth requires every request to carry exactly these basic-auth
// credentials; an empty username turns authentication off again.
func (s *Server) SetBasicAuth(username, password string) {
	if username == "" {
		s.SetAuthFunc(nil)
		return
	}
	s.SetAuthFunc(func(u, p string, ok bool) bool {
		return ok && u == username && p == password
	})
}

// SetAuthFunc installs a custom credential check, for credentials that are
// only known at run time (e.g. tokens minted by a fake GitHub API); nil turns
// authentication off.
func (s *Server) SetAuthFunc(f AuthFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auth = f
}

// SetOutage makes the server answer every request with 503 Service
// Unavailable while on, as a git host in an outage does: a transient
// failure, unlike a refused credential.
func (s *Server) SetOutage(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outage = on
}

// RepoURL returns the HTTP clone URL of the named repository.
func (s *Server) RepoURL(name string) string {
	return s.URL + "/" + name + ".git"
}

// Requests returns what the server has been asked for the named repository
// so far, over HTTP, whether or not the request was allowed.
func (s *Server) Requests(name string) Requests {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[name]
}

// count records request r in the per-repository counters. In protocol
// v0 and v1 the refs are listed by GET info/refs and objects sent by POST
// git-upload-pack; in v2 (asked for by a Git-Protocol header) GET
// info/refs only advertises capabilities, and each POST carries a command,
// ls-refs or fetch.
func (s *Server) count(r *http.Request) {
	name, rest, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), ".git/")
	if !ok {
		return
	}
	v2 := strings.Contains(r.Header.Get("Git-Protocol"), "version=2")
	var lists, fetches int
	switch {
	case r.Method == http.MethodGet && rest == "info/refs" && !v2:
		lists = 1
	case r.Method == http.MethodPost && rest == "git-upload-pack" && !v2:
		fetches = 1
	case r.Method == http.MethodPost && rest == "git-upload-pack":
		switch uploadPackCommand(r) {
		case "ls-refs":
			lists = 1
		case "fetch":
			fetches = 1
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.requests == nil {
		s.requests = map[string]Requests{}
	}
	c := s.requests[name]
	c.RefLists += lists
	c.Fetches += fetches
	s.requests[name] = c
}

// uploadPackCommand returns the command of a protocol v2 upload-pack
// request (its first pkt-line, "command=<name>"), leaving the body for the
// backend to read.
func uploadPackCommand(r *http.Request) string {
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return ""
	}
	data := body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return ""
		}
		data, _ = io.ReadAll(io.LimitReader(zr, 1024))
	}
	if len(data) < 4 {
		return ""
	}
	n, err := strconv.ParseUint(string(data[:4]), 16, 16)
	if err != nil || n < 4 || int(n) > len(data) {
		return ""
	}
	command, _ := strings.CutPrefix(strings.TrimSpace(string(data[4:n])), "command=")
	return command
}

// guard wraps the backend with the current authentication policy, answering
// 401 with a challenge the way git hosts do so clients retry with
// credentials.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.count(r)
		s.mu.Lock()
		auth, outage := s.auth, s.outage
		s.mu.Unlock()
		if outage {
			http.Error(w, "the git host is unavailable", http.StatusServiceUnavailable)
			return
		}
		if auth != nil {
			u, p, ok := r.BasicAuth()
			if !auth(u, p, ok) {
				w.Header().Set("WWW-Authenticate", `Basic realm="gitserver"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// testLogWriter sends git's diagnostics to the test log, where they show up
// only for failing tests (or with -v) instead of cluttering the output.
type testLogWriter struct{ t testing.TB }

// Write logs p as one test log line.
func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Logf("git: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// httpBackendPath locates git-http-backend in git's exec path, so the server
// works wherever the distribution installs git's helpers.
func httpBackendPath(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("gitserver: git --exec-path: %v", err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("gitserver: git-http-backend not found: %v", err)
	}
	return p
}

// gitEnv is the environment for every git process the server starts: isolated
// from the developer's configuration and with a fixed identity and clock so
// commit SHAs are reproducible.
func gitEnv() []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.TempDir(),
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=Stackyard Test",
		"GIT_AUTHOR_EMAIL=test@stackyard.invalid",
		"GIT_AUTHOR_DATE=2024-01-01T00:00:00Z",
		"GIT_COMMITTER_NAME=Stackyard Test",
		"GIT_COMMITTER_EMAIL=test@stackyard.invalid",
		"GIT_COMMITTER_DATE=2024-01-01T00:00:00Z",
	}
}
