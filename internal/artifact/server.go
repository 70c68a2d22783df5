package artifact

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
)

// Handler returns the http.Handler that serves the artifacts of store:
// GET and HEAD of /<kind>/<namespace>/<name>/<revision>.tar.gz, with range
// and conditional requests. Any other path, including one with "..", an
// encoded slash or a temporary file's name, is answered 404 before the file
// system is touched, and the file is opened through the store's os.Root, so
// nothing outside the storage directory can be read.
func Handler(store *Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		rel, ok := strings.CutPrefix(r.URL.Path, "/")
		if !ok || r.URL.RawPath != "" {
			http.NotFound(w, r)
			return
		}
		k, rev, err := parsePath(rel)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		p := Path(k, rev)
		f, err := store.root.Open(p)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				logr.FromContextOrDiscard(r.Context()).Error(err, "opening artifact", "path", p)
			}
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		info, err := f.Stat()
		if err != nil || !info.Mode().IsRegular() {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/gzip")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		http.ServeContent(w, r, info.Name(), info.ModTime(), f)
	})
}

// Server runs Handler on a listener until its context ends. It implements
// controller-runtime's manager.Runnable, so the operator adds it to its
// manager with mgr.Add.
type Server struct {
	store *Store
	ln    net.Listener
	log   logr.Logger
}

// NewServer returns a server for store on ln. Listening is the caller's
// job so that it can learn the bound address (":0" in tests) before
// choosing the store's advertised URL.
func NewServer(store *Store, ln net.Listener, log logr.Logger) *Server {
	return &Server{store: store, ln: ln, log: log}
}

// NeedLeaderElection returns false: every replica serves the artifacts it
// has, whether or not it leads.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx is done, then shuts down gracefully, giving
// downloads in flight a few seconds to finish.
func (s *Server) Start(ctx context.Context) error {
	srv := &http.Server{
		Handler:           Handler(s.store),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return logr.NewContext(context.Background(), s.log) },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.ln) }()
	s.log.Info("serving artifacts", "address", s.ln.Addr().String(), "url", s.store.baseURL.String())
	select {
	case err := <-errc:
		return fmt.Errorf("artifact server: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("artifact server: %w", err)
	}
	return nil
}

// LocalURL returns an http URL reaching addr from the same machine: a
// wildcard host (":9090", "[::]:9090") becomes 127.0.0.1. It is the
// default advertised URL when workspaces run on the operator's machine.
func LocalURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
