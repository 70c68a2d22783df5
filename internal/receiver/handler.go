package receiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
)

// What serving needs: Receivers by path, their Secrets' tokens, and their
// status.lastHeard.
//
// +kubebuilder:rbac:groups=notification.stackyard.dev,resources=receivers,verbs=get;list;watch
// +kubebuilder:rbac:groups=notification.stackyard.dev,resources=receivers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// PathField is the field index of Receivers by status.webhookPath.
const PathField = "status.webhookPath"

// PathPrefix begins every Receiver's path.
const PathPrefix = "/hook/"

// Bounds of what the endpoint accepts.
const (
	// MaxBody is the largest body read; a larger one is refused (413).
	MaxBody = 1 << 20
	// perSourceRate and perSourceBurst bound the requests of one source
	// address (429 beyond).
	perSourceRate  = 10
	perSourceBurst = 30
	// replayWindow is how long a delivery id is remembered.
	replayWindow = 24 * time.Hour
	// maxRemembered bounds the delivery ids and sources remembered.
	maxRemembered = 10000
)

// Handler serves the Receivers' webhooks: POST PathPrefix+digest.
type Handler struct {
	// Reader finds Receivers by PathField (the manager's cache, with the
	// index set up by IndexPath).
	Reader client.Reader
	// Secrets reads the Receivers' Secrets.
	Secrets client.Reader
	// Status records status.lastHeard.
	Status client.StatusClient
	// Waker wakes the objects a push concerns.
	Waker *Waker
	// Log logs what was refused and what woke.
	Log logr.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
	seen     map[string]time.Time
}

// response is the JSON body of every answer.
type response struct {
	// Message says what happened.
	Message string `json:"message"`
	// Woken counts the objects a push woke.
	Woken int `json:"woken,omitempty"`
}

// ServeHTTP checks, in order: the method (405), the source's rate (429),
// the path (404, the same for a path that names no Receiver: the answer
// tells nothing about what exists), the body's size (413), the Receiver's
// Secret (503 while it has no token), the signature (401), a replayed
// delivery id (409) and the body (400); a verified push wakes the
// objects it concerns (202), a verified event that is not a push is
// accepted and ignored (202).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		reply(w, http.StatusMethodNotAllowed, response{Message: "use POST"})
		return
	}
	if !h.allow(source(r)) {
		w.Header().Set("Retry-After", "1")
		reply(w, http.StatusTooManyRequests, response{Message: "too many requests from this address"})
		return
	}
	rcv, err := h.find(ctx, r.URL.Path)
	if err != nil {
		h.Log.Error(err, "finding the Receiver of a request")
		reply(w, http.StatusInternalServerError, response{Message: "the receiver could not be looked up"})
		return
	}
	if rcv == nil {
		reply(w, http.StatusNotFound, response{Message: "no receiver here"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			reply(w, http.StatusRequestEntityTooLarge, response{Message: fmt.Sprintf("the body is larger than %d bytes", MaxBody)})
			return
		}
		reply(w, http.StatusBadRequest, response{Message: "the body could not be read"})
		return
	}
	token, err := h.token(ctx, rcv)
	if err != nil {
		h.Log.Info("a request for a Receiver without a token", "receiver", client.ObjectKeyFromObject(rcv).String(), "error", err.Error())
		reply(w, http.StatusServiceUnavailable, response{Message: "the receiver is not ready"})
		return
	}
	req := Request{Header: r.Header, Body: body}
	if err := Verify(rcv.Spec.Type, req, token); err != nil {
		h.Log.Info("refused a request with a wrong signature", "receiver", client.ObjectKeyFromObject(rcv).String(), "source", source(r))
		reply(w, http.StatusUnauthorized, response{Message: err.Error()})
		return
	}
	if id := DeliveryID(rcv.Spec.Type, r.Header); id != "" && !h.firstDelivery(string(rcv.UID)+"/"+id) {
		reply(w, http.StatusConflict, response{Message: "this delivery was received already"})
		return
	}
	push, err := Parse(rcv.Spec.Type, req)
	switch {
	case errors.Is(err, ErrIgnored):
		reply(w, http.StatusAccepted, response{Message: err.Error()})
		return
	case err != nil:
		reply(w, http.StatusBadRequest, response{Message: err.Error()})
		return
	}
	woken, err := h.Waker.Wake(ctx, rcv.Namespace, rcv.Name, push)
	if err != nil {
		h.Log.Error(err, "waking the objects of a push", "receiver", client.ObjectKeyFromObject(rcv).String())
		reply(w, http.StatusInternalServerError, response{Message: "the push could not be passed on"})
		return
	}
	h.Log.Info("a push woke objects", "receiver", client.ObjectKeyFromObject(rcv).String(), "ref", push.Ref, "woken", woken)
	h.heard(ctx, rcv)
	reply(w, http.StatusAccepted, response{Message: fmt.Sprintf("%s: woke %d objects", push.Ref, len(woken)), Woken: len(woken)})
}

// find returns the Receiver whose status.webhookPath is path, or nil.
func (h *Handler) find(ctx context.Context, path string) (*notificationv1alpha1.Receiver, error) {
	if !strings.HasPrefix(path, PathPrefix) || len(path) == len(PathPrefix) {
		return nil, nil
	}
	var list notificationv1alpha1.ReceiverList
	if err := h.Reader.List(ctx, &list, client.MatchingFields{PathField: path}); err != nil {
		return nil, err
	}
	if len(list.Items) != 1 {
		return nil, nil
	}
	return &list.Items[0], nil
}

// token reads the Receiver's token.
func (h *Handler) token(ctx context.Context, rcv *notificationv1alpha1.Receiver) (string, error) {
	var s corev1.Secret
	if err := h.Secrets.Get(ctx, client.ObjectKey{Namespace: rcv.Namespace, Name: rcv.Spec.SecretRef.Name}, &s); err != nil {
		return "", err
	}
	token := string(s.Data[notificationv1alpha1.ReceiverTokenKey])
	if token == "" {
		return "", fmt.Errorf("Secret %s has no key %q", s.Name, notificationv1alpha1.ReceiverTokenKey)
	}
	return token, nil
}

// heard records status.lastHeard; a failure is only logged, since the
// push was passed on.
func (h *Handler) heard(ctx context.Context, rcv *notificationv1alpha1.Receiver) {
	base := rcv.DeepCopy()
	now := metav1.NewTime(h.now())
	rcv.Status.LastHeard = &now
	if err := h.Status.Status().Patch(ctx, rcv, client.MergeFrom(base)); err != nil {
		h.Log.Info("could not record status.lastHeard", "receiver", client.ObjectKeyFromObject(rcv).String(), "error", err.Error())
	}
}

// allow takes a token from the bucket of the source address.
func (h *Handler) allow(src string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.limiters == nil || len(h.limiters) > maxRemembered {
		h.limiters = map[string]*rate.Limiter{}
	}
	l, ok := h.limiters[src]
	if !ok {
		l = rate.NewLimiter(perSourceRate, perSourceBurst)
		h.limiters[src] = l
	}
	return l.AllowN(h.now(), 1)
}

// firstDelivery records a delivery id and reports whether it is new within
// the replay window.
func (h *Handler) firstDelivery(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	if h.seen == nil {
		h.seen = map[string]time.Time{}
	}
	if at, ok := h.seen[id]; ok && now.Sub(at) < replayWindow {
		return false
	}
	if len(h.seen) >= maxRemembered {
		for k, at := range h.seen {
			if now.Sub(at) >= replayWindow {
				delete(h.seen, k)
			}
		}
	}
	if len(h.seen) < maxRemembered {
		h.seen[id] = now
	}
	return true
}

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// source is the request's remote address without its port.
func source(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// reply writes body as JSON with status code.
func reply(w http.ResponseWriter, code int, body response) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// IndexPath registers the field index Handler finds Receivers by.
func IndexPath(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &notificationv1alpha1.Receiver{}, PathField, func(obj client.Object) []string {
		if r, ok := obj.(*notificationv1alpha1.Receiver); ok && r.Status.WebhookPath != "" {
			return []string{r.Status.WebhookPath}
		}
		return nil
	})
}

// NewServer serves h on ln as a manager runnable.
func NewServer(ln net.Listener, h http.Handler) manager.Runnable {
	mux := http.NewServeMux()
	mux.Handle(PathPrefix, h)
	return &manager.Server{
		Name:            "receiver",
		Server:          &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second},
		Listener:        ln,
		ShutdownTimeout: ptr.To(5 * time.Second),
	}
}
