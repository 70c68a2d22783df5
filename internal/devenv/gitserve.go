package devenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi" //nolint:gosec // git's http-backend, for stackyard dev; Go is far past the Httpoxy fix
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// httpBackend is where Debian (and most distributions) install git's smart
// HTTP server.
var httpBackendCandidates = []string{"/usr/lib/git-core/git-http-backend", "/usr/libexec/git-core/git-http-backend"}

// GitServer serves the git repositories under a directory read-only over
// HTTP on loopback, with git's own http-backend: what a Stack's projectRepo
// points at in `stackyard dev`.
type GitServer struct {
	srv *http.Server
	ln  net.Listener
}

// StartGitServer serves root's repositories on 127.0.0.1, on the port saved
// in portFile when it is free (so Stack URLs stay the same across restarts),
// otherwise on a new port that is then saved.
func StartGitServer(root, portFile string) (*GitServer, error) {
	backend := ""
	for _, c := range httpBackendCandidates {
		if _, err := os.Stat(c); err == nil {
			backend = c
			break
		}
	}
	if backend == "" {
		return nil, errors.New("git-http-backend not found: install git")
	}
	ln, err := listenSaved(portFile)
	if err != nil {
		return nil, err
	}
	handler := &cgi.Handler{
		Path: backend,
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1"},
	}
	s := &GitServer{ln: ln, srv: &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// listenSaved listens on the port recorded in portFile, or on any free port
// (recording it) when there is none or it is taken.
func listenSaved(portFile string) (net.Listener, error) {
	if data, err := os.ReadFile(portFile); err == nil {
		if port, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
				return ln, nil
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := os.WriteFile(portFile, []byte(strconv.Itoa(port)), 0o644); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

// URL is the clone URL of the repository whose git directory is at rel
// below the served root (e.g. "sample/.git").
func (s *GitServer) URL(rel string) string {
	return fmt.Sprintf("http://%s/%s", s.ln.Addr(), filepath.ToSlash(rel))
}

// Stop stops serving.
func (s *GitServer) Stop(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// git runs the git CLI in dir with a fixed identity for the commits it
// makes, isolated from the machine's git configuration.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=stackyard dev", "GIT_AUTHOR_EMAIL=dev@stackyard.invalid",
		"GIT_COMMITTER_NAME=stackyard dev", "GIT_COMMITTER_EMAIL=dev@stackyard.invalid",
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}
