package kubernetes

import (
	"context"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackyard/stackyard/internal/agent/auth"
)

// DefaultTokenTTL is the lifetime asked for the tokens Dial mints: long
// enough to be reused across many calls, short enough that a leaked one
// soon stops working (and only ever for one workspace).
const DefaultTokenTTL = time.Hour

// tokenSource mints and caches service account tokens for the operator's
// own service account, one per workspace audience.
type tokenSource struct {
	c   client.Client
	sa  types.NamespacedName
	ttl time.Duration
	now func() time.Time

	mu     sync.Mutex
	tokens map[string]cachedToken // by audience
}

// cachedToken is a minted token and when to stop using it.
type cachedToken struct {
	value   string
	renewAt time.Time
}

// token returns a valid token for audience, minting one with the
// TokenRequest API when none is cached or the cached one is in the last
// fifth of its life.
func (ts *tokenSource) token(ctx context.Context, audience string) (string, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t, ok := ts.tokens[audience]; ok && ts.now().Before(t.renewAt) {
		return t.value, nil
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ts.sa.Namespace, Name: ts.sa.Name}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         []string{audience},
		ExpirationSeconds: ptr.To(int64(ts.ttl / time.Second)),
	}}
	issued := ts.now()
	if err := ts.c.SubResource("token").Create(ctx, sa, req); err != nil {
		return "", fmt.Errorf("requesting a token for service account %s: %w", ts.sa, err)
	}
	life := req.Status.ExpirationTimestamp.Time.Sub(issued)
	if life <= 0 {
		life = ts.ttl
	}
	ts.tokens[audience] = cachedToken{value: req.Status.Token, renewAt: issued.Add(life * 4 / 5)}
	return req.Status.Token, nil
}

// forget drops the token of audience.
func (ts *tokenSource) forget(audience string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.tokens, audience)
}

// perRPC returns gRPC credentials that attach a current token for
// audience to every call, renewing it as it nears expiry, so a long-lived
// connection never presents an expired token.
func (ts *tokenSource) perRPC(audience string) rpcToken {
	return rpcToken{ts: ts, audience: audience}
}

// rpcToken implements credentials.PerRPCCredentials over a tokenSource.
type rpcToken struct {
	ts       *tokenSource
	audience string
}

// GetRequestMetadata returns the authorization header for one call.
func (r rpcToken) GetRequestMetadata(ctx context.Context, uri ...string) (map[string]string, error) {
	tok, err := r.ts.token(ctx, r.audience)
	if err != nil {
		return nil, err
	}
	return auth.BearerToken(tok).GetRequestMetadata(ctx, uri...)
}

// RequireTransportSecurity reports false, like auth.BearerToken: the pod
// network carries the call (see there why).
func (rpcToken) RequireTransportSecurity() bool { return false }
