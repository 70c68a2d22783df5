package cloudapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/authn"
)

// Handler is the http.Handler of the cloud API (see the package
// documentation for what it serves).
type Handler struct {
	client    client.Client
	reviewer  *authn.CachedReviewer
	users     *limiters // per authenticated user
	addresses *limiters // per remote address, for tokens not yet reviewed
	log       logr.Logger
	mux       *http.ServeMux
}

// NewHandler returns the cloud API's handler. c reads Stacks and Updates
// from a cache with StackNameIndex (the operator passes its manager's
// client; SetupIndexes registers the index) and creates TokenReviews and
// SubjectAccessReviews, which its identity must be allowed to create; the
// answers are remembered for authn.DefaultCacheTTL. Each authenticated
// user, and each remote address presenting tokens not yet reviewed, is
// rate limited (429). log receives one line per answer at V(1), with the
// user and the stack but never the token.
func NewHandler(c client.Client, log logr.Logger, opts ...HandlerOption) *Handler {
	h := &Handler{
		client:    c,
		reviewer:  &authn.CachedReviewer{Reviewer: authn.Reviewer{Client: c}},
		users:     newLimiters(perUserRate, perUserBurst, time.Now),
		addresses: newLimiters(perAddressRate, perAddressBurst, time.Now),
		log:       log,
		mux:       http.NewServeMux(),
	}
	for _, o := range opts {
		o(h)
	}
	h.mux.HandleFunc("GET /api/stacks/{org}/{project}/{stack}/updates", h.serveUpdates)
	h.mux.HandleFunc("GET /api/stacks/{org}/{project}/{stack}/updates/latest/previews", h.servePreviews)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, ErrorResponse{Code: http.StatusNotFound, Message: "Not Found"})
	})
	return h
}

// HandlerOption changes a Handler's defaults.
type HandlerOption func(*Handler)

// WithUserRateLimit sets the rate (requests a second) and burst allowed
// to each authenticated user.
func WithUserRateLimit(perSecond float64, burst int) HandlerOption {
	return func(h *Handler) { h.users = newLimiters(rate.Limit(perSecond), burst, time.Now) }
}

// WithAddressRateLimit replaces the per-address limit on requests whose
// token is not yet reviewed: perSecond and burst of a token bucket per
// remote address.
func WithAddressRateLimit(perSecond float64, burst int) HandlerOption {
	return func(h *Handler) { h.addresses = newLimiters(rate.Limit(perSecond), burst, time.Now) }
}

// ServeHTTP answers one request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// NewServer returns a manager.Runnable that serves h on ln until the
// manager stops, on every replica (each reads its own cache).
func NewServer(ln net.Listener, h http.Handler) manager.Runnable {
	return &manager.Server{
		Name:            "cloud-api",
		Server:          &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		Listener:        ln,
		ShutdownTimeout: ptr.To(5 * time.Second),
	}
}

// query is a request's parameters.
type query struct {
	name      stackName
	namespace string
	page      int
	pageSize  int
	service   bool
}

// serveUpdates answers …/updates: the non-preview operations, newest
// first, in the CLI shape or, with output-type=service, the service shape.
func (h *Handler) serveUpdates(w http.ResponseWriter, r *http.Request) {
	h.serve(w, r, func(ops []operation, q query) any {
		list := updates(ops)
		if !q.service {
			infos := make([]UpdateInfo, 0, len(list))
			for _, op := range page(list, q.page, q.pageSize) {
				infos = append(infos, info(op, KindPreview))
			}
			return UpdatesResponse{Updates: infos}
		}
		return serviceResponse(list, KindPreview, latestVersion(ops), q)
	})
}

// servePreviews answers …/updates/latest/previews: the previews since the
// last non-preview operation, oldest first, in the service shape.
func (h *Handler) servePreviews(w http.ResponseWriter, r *http.Request) {
	h.serve(w, r, func(ops []operation, q query) any {
		return serviceResponse(previews(ops), KindPreviewUpdate, latestVersion(ops), q)
	})
}

// serviceResponse renders a page of operations in the service shape.
func serviceResponse(list []operation, previewKind string, latest int64, q query) ServiceUpdatesResponse {
	resp := ServiceUpdatesResponse{Updates: []ServiceUpdate{}, ItemsPerPage: q.pageSize, Total: len(list)}
	if q.pageSize <= 0 {
		resp.ItemsPerPage = len(list)
	}
	for _, op := range page(list, q.page, q.pageSize) {
		resp.Updates = append(resp.Updates, service(op, previewKind, latest))
	}
	return resp
}

// serve authenticates the request, finds the Stacks it names that the
// caller may get, and writes what render makes of their history.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, render func([]operation, query) any) {
	ctx := r.Context()
	log := h.log.WithValues("path", r.URL.Path)
	user, q, ops, err := h.answer(ctx, r)
	if err != nil {
		var he *authn.Error
		if !errors.As(err, &he) {
			he = &authn.Error{Code: http.StatusInternalServerError, Message: "internal error", Detail: err.Error()}
		}
		if he.Code >= http.StatusInternalServerError {
			log.Error(errors.New(cmp.Or(he.Detail, he.Message)), "Could not answer a cloud API request", "user", user, "code", he.Code)
		} else {
			log.V(1).Info("Refused a cloud API request", "user", user, "code", he.Code, "reason", cmp.Or(he.Detail, he.Message))
		}
		if he.Code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		writeJSON(w, he.Code, ErrorResponse{Code: he.Code, Message: he.Message})
		return
	}
	log.V(1).Info("Answered a cloud API request", "user", user, "stack", q.name.String(), "operations", len(ops))
	writeJSON(w, http.StatusOK, render(ops, q))
}

// answer runs the checks in the order their errors take precedence: 401,
// 400, 404, 403, 409. It returns the user's name for the log.
func (h *Handler) answer(ctx context.Context, r *http.Request) (string, query, []operation, error) {
	token, err := authn.BearerToken(r)
	if err != nil {
		return "", query{}, nil, authn.Unauthorized(err.Error())
	}
	if !h.reviewer.Cached(token) && !h.addresses.allow(remoteHost(r)) {
		return "", query{}, nil, tooManyRequests("tokens to review from " + remoteHost(r))
	}
	user, err := h.reviewer.Authenticate(ctx, token)
	if err != nil {
		return "", query{}, nil, err
	}
	if !h.users.allow(user.Username) {
		return user.Username, query{}, nil, tooManyRequests("user " + user.Username)
	}
	q, err := parseQuery(r)
	if err != nil {
		return user.Username, q, nil, err
	}
	var list pulumiv1.StackList
	if err := h.client.List(ctx, &list, client.InNamespace(q.namespace), client.MatchingFields{StackNameIndex: q.name.stack}); err != nil {
		return user.Username, q, nil, unavailable("listing Stacks", err)
	}
	var found bool
	byNamespace := map[string][]*pulumiv1.Stack{}
	for i := range list.Items {
		s := &list.Items[i]
		if !q.name.deployedBy(s) {
			continue
		}
		found = true
		ok, err := h.reviewer.Allowed(ctx, user, authorizationv1.ResourceAttributes{
			Namespace: s.Namespace, Name: s.Name, Verb: "get",
			Group: pulumiv1.GroupVersion.Group, Version: pulumiv1.GroupVersion.Version, Resource: "stacks",
		})
		if err != nil {
			return user.Username, q, nil, err
		}
		if ok {
			byNamespace[s.Namespace] = append(byNamespace[s.Namespace], s)
		}
	}
	switch {
	case !found:
		return user.Username, q, nil, &authn.Error{Code: http.StatusNotFound, Message: fmt.Sprintf("Not Found: no Stack deploys %s", q.name)}
	case len(byNamespace) == 0:
		return user.Username, q, nil, &authn.Error{Code: http.StatusForbidden,
			Message: fmt.Sprintf("Forbidden: %q may not get the Stacks that deploy %s", user.Username, q.name)}
	case len(byNamespace) > 1:
		namespaces := slices.Sorted(maps.Keys(byNamespace))
		return user.Username, q, nil, &authn.Error{Code: http.StatusConflict, Message: fmt.Sprintf(
			"Stacks in the namespaces %s deploy %s: choose one with ?namespace=", strings.Join(namespaces, ", "), q.name)}
	}
	var lists [][]operation
	for _, stacks := range byNamespace {
		for _, s := range stacks {
			running, err := h.running(ctx, s)
			if err != nil {
				return user.Username, q, nil, err
			}
			lists = append(lists, operationsOf(s, running))
		}
	}
	return user.Username, q, history(lists...), nil
}

// running returns the Update a Stack runs now, or nil when it runs none or
// the Update is gone.
func (h *Handler) running(ctx context.Context, s *pulumiv1.Stack) (*autov1alpha1.Update, error) {
	cur := s.Status.CurrentUpdate
	if cur == nil || cur.Name == "" {
		return nil, nil
	}
	var upd autov1alpha1.Update
	if err := h.client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: cur.Name}, &upd); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, unavailable("reading Update "+s.Namespace+"/"+cur.Name, err)
	}
	return &upd, nil
}

// unavailable is a 503 for a read that failed: the cache not started yet,
// the API server unreachable. Either passes, so Kargo may measure again.
func unavailable(what string, err error) error {
	return &authn.Error{Code: http.StatusServiceUnavailable, Message: "the operator could not read the history; try again",
		Detail: what + ": " + err.Error()}
}

// maxPageSize bounds page and pageSize so that their product cannot
// overflow.
const maxPageSize = 1 << 20

// parseQuery reads the path and query parameters.
func parseQuery(r *http.Request) (query, error) {
	q := query{
		name:      stackName{org: r.PathValue("org"), project: r.PathValue("project"), stack: r.PathValue("stack")},
		namespace: r.URL.Query().Get("namespace"),
	}
	var err error
	if q.page, err = intParam(r, "page"); err != nil {
		return q, err
	}
	if q.pageSize, err = intParam(r, "pageSize"); err != nil {
		return q, err
	}
	if q.pageSize > 0 && q.page == 0 && !r.URL.Query().Has("page") {
		q.page = 1
	}
	switch t := r.URL.Query().Get("output-type"); t {
	case "", "cli":
	case "service":
		q.service = true
	default:
		return q, &authn.Error{Code: http.StatusBadRequest, Message: fmt.Sprintf("output-type %q: use cli or service", t)}
	}
	return q, nil
}

// intParam reads a non-negative integer query parameter; absent is 0.
func intParam(r *http.Request, key string) (int, error) {
	s := r.URL.Query().Get(key)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > maxPageSize {
		return 0, &authn.Error{Code: http.StatusBadRequest, Message: fmt.Sprintf("%s %q: want an integer from 0 to %d", key, s, maxPageSize)}
	}
	return n, nil
}

// writeJSON writes v as the JSON body of an answer with this status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		code, body = http.StatusInternalServerError, []byte(`{"code":500,"message":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}
