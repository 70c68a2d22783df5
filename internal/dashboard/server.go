package dashboard

import (
	"cmp"
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackyard/stackyard/internal/authn"
)

// The dashboard reviews tokens and read rights with the API server.
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

//go:embed assets
var assets embed.FS

// Config is what the dashboard needs from the operator.
type Config struct {
	// Reader reads the objects shown (the manager's cached client). The
	// dashboard never writes with it: actions use the user's own token.
	Reader client.Client
	// Reviews creates TokenReviews and SubjectAccessReviews as the
	// operator.
	Reviews client.Client
	// APIReader reads, uncached and as the operator, what the cache does
	// not hold: the plan Secrets whose value diffs a promotion's page
	// shows to those who may list the namespace's Stacks. Nil: a client
	// of RESTConfig.
	APIReader client.Reader
	// Informers feed live updates (the manager's cache); nil turns them
	// off.
	Informers cache.Informers
	// RESTConfig locates the API server. Actions are sent to it with the
	// user's own token, never with the operator's credentials.
	RESTConfig *rest.Config
	// ReadOnly hides and refuses every action.
	ReadOnly bool
	// Log receives one line per refused or failed request, never a token.
	Log logr.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Heartbeat is how often an open event stream sends a keep-alive and
	// asks the API server again whether its token is still valid, ending
	// the stream when it is not (revoked, expired, its ServiceAccount
	// deleted); zero means 15 seconds.
	Heartbeat time.Duration
}

// Server is the dashboard: an http.Handler, and a manager.Runnable when
// given a listener.
type Server struct {
	reader     client.Client
	apiReader  client.Reader
	reviewer   *authn.CachedReviewer
	informers  cache.Informers
	restConfig *rest.Config
	readOnly   bool
	log        logr.Logger
	clock      func() time.Time
	heartbeat  time.Duration

	pages    map[string]*template.Template
	mux      *http.ServeMux
	broker   broker
	boot     string
	stopping chan struct{}
	listener net.Listener
}

// New returns the dashboard's server.
func New(cfg Config) (*Server, error) {
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	boot := make([]byte, 8)
	if _, err := rand.Read(boot); err != nil {
		return nil, err
	}
	s := &Server{
		reader: cfg.Reader, informers: cfg.Informers,
		reviewer:   &authn.CachedReviewer{Reviewer: authn.Reviewer{Client: cfg.Reviews}, TTL: reviewTTL, Now: cfg.Now},
		restConfig: cfg.RESTConfig, readOnly: cfg.ReadOnly, log: cfg.Log, clock: cfg.Now,
		heartbeat: cmp.Or(cfg.Heartbeat, defaultHeartbeat),
		pages:     pages, mux: http.NewServeMux(), boot: hex.EncodeToString(boot), stopping: make(chan struct{}),
	}
	if s.apiReader = cfg.APIReader; s.apiReader == nil && cfg.RESTConfig != nil && cfg.Reader != nil {
		if s.apiReader, err = client.New(cfg.RESTConfig, client.Options{Scheme: cfg.Reader.Scheme()}); err != nil {
			return nil, fmt.Errorf("dashboard: a client for the plan Secrets: %w", err)
		}
	}
	s.routes()
	return s, nil
}

func (s *Server) now() time.Time {
	if s.clock != nil {
		return s.clock()
	}
	return time.Now()
}

func (s *Server) routes() {
	static, _ := fs.Sub(assets, "assets/static")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	s.mux.HandleFunc("GET /login", s.serveLogin)
	s.mux.HandleFunc("POST /login", s.login)
	s.mux.HandleFunc("POST /logout", s.logout)
	s.mux.HandleFunc("GET /events", s.serveEvents)
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/pipelines", http.StatusSeeOther)
	})
	s.mux.HandleFunc("GET /pipelines", s.page("pipelines", "pipelines", s.pipelinesPage))
	s.mux.HandleFunc("GET /pipelines/{namespace}/{name}", s.page("pipeline", "pipelines", s.pipelinePage))
	s.mux.HandleFunc("GET /promotions/{namespace}/{name}", s.page("promotion", "pipelines", s.promotionPage))
	s.mux.HandleFunc("GET /stacks", s.page("stacks", "stacks", s.stacksPage))
	s.mux.HandleFunc("GET /stacks/{namespace}/{name}", s.page("stack", "stacks", s.stackPage))
	s.mux.HandleFunc("GET /updates/{namespace}/{name}", s.page("update", "stacks", s.updatePage))
	s.mux.HandleFunc("GET /audit", s.page("audit", "audit", s.auditPage))
	s.mux.HandleFunc("GET /audit.json", s.auditJSON)
	s.mux.HandleFunc("POST /actions/{action}", s.act)
}

// ServeHTTP answers with security headers on every response: no framing,
// no content from elsewhere, no sniffing.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	s.mux.ServeHTTP(w, r)
}

// Listen binds addr, so that Start serves there; Addr says where.
func (s *Server) Listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s.listener = ln
	return nil
}

// Addr is the bound address, once Listen succeeded.
func (s *Server) Addr() net.Addr {
	if s.listener == nil {
		return nil
	}
	return s.listener.Addr()
}

// NeedLeaderElection is false: every replica serves the dashboard from its
// own cache.
func (s *Server) NeedLeaderElection() bool { return false }

// Start feeds live updates from the informers and serves on the listener
// until ctx ends; open event streams are closed first, so that pages
// reconnect to the next operator.
func (s *Server) Start(ctx context.Context) error {
	if s.listener == nil {
		return errors.New("dashboard: Start before Listen")
	}
	if err := s.watch(ctx); err != nil {
		return err
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(s.listener) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	close(s.stopping)
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
