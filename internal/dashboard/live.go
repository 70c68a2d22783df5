package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/authn"
)

// defaultHeartbeat keeps an idle event stream open through proxies that
// close silent connections, and is how often its token is reviewed again.
const defaultHeartbeat = 15 * time.Second

// watched are the kinds whose changes a page shows.
func watched() []client.Object {
	return []client.Object{
		&pulumiv1.Stack{}, &autov1alpha1.Update{},
		&promotionv1alpha1.Pipeline{}, &promotionv1alpha1.Stage{}, &promotionv1alpha1.Release{},
		&promotionv1alpha1.Promotion{}, &promotionv1alpha1.Approval{},
	}
}

// broker tells every open page that something changed. A page learns only
// that: it fetches its content again, with its own rights, so an event
// carries nothing a user might not see.
type broker struct {
	mu      sync.Mutex
	version uint64
	subs    map[chan struct{}]struct{}
}

// publish records a change and wakes every subscriber; a subscriber that
// has not yet taken the last wake-up gets one, not two.
func (b *broker) publish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.version++
	for ch := range b.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// subscribe returns a channel woken on changes, and its cancel function.
func (b *broker) subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	b.mu.Lock()
	if b.subs == nil {
		b.subs = map[chan struct{}]struct{}{}
	}
	b.subs[ch] = struct{}{}
	b.mu.Unlock()
	return ch, func() {
		b.mu.Lock()
		delete(b.subs, ch)
		b.mu.Unlock()
	}
}

func (b *broker) current() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.version
}

// watch feeds the broker from the manager's informers.
func (s *Server) watch(ctx context.Context) error {
	if s.informers == nil {
		return nil
	}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.broker.publish() },
		UpdateFunc: func(any, any) { s.broker.publish() },
		DeleteFunc: func(any) { s.broker.publish() },
	}
	for _, obj := range watched() {
		inf, err := s.informers.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("dashboard: watching %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return fmt.Errorf("dashboard: watching %T: %w", obj, err)
		}
	}
	return nil
}

// serveEvents is the page's event stream. It opens with the server's boot
// ID and a retry interval, so that a page that reconnects after an
// operator restart knows to fetch its content again; then one "change"
// event per wake-up, and a comment now and then to keep the connection.
// At each of those the token is reviewed again, past the cache, so a
// stream outlives neither the token nor its ServiceAccount; the page's
// reconnection then meets the sign-in page's 401.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	sess, err := s.identify(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	changes, cancel := s.broker.subscribe()
	defer cancel()
	fmt.Fprintf(w, "retry: 1000\nevent: hello\ndata: %s\n\n", s.boot)
	flusher.Flush()
	ping := time.NewTicker(s.heartbeat)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.stopping:
			return
		case <-changes:
			fmt.Fprintf(w, "event: change\ndata: %d\n\n", s.broker.current())
		case <-ping.C:
			if !s.stillValid(r.Context(), sess.token) {
				return
			}
			fmt.Fprint(w, ": ping\n\n")
		}
		flusher.Flush()
	}
}

// stillValid asks the API server whether token is still valid, and keeps
// the answer for the pages' requests. Only a refusal ends a stream: an API
// server that cannot be reached leaves it open until the next heartbeat.
func (s *Server) stillValid(ctx context.Context, token string) bool {
	_, err := s.reviewer.Refresh(ctx, token)
	var aerr *authn.Error
	return !errors.As(err, &aerr) || aerr.Code != http.StatusUnauthorized
}
