package authn

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
)

// DefaultCacheTTL is how long a CachedReviewer remembers an answer. The
// API server's own webhook authenticator and authorizer remember theirs
// for minutes; a revoked token or binding is believed for at most this
// long.
const DefaultCacheTTL = 10 * time.Second

// maxCached bounds each of a CachedReviewer's caches: past it, the
// expired answers are dropped, then all of them.
const maxCached = 4096

// CachedReviewer is a Reviewer that remembers, for TTL, who a token
// belongs to (or that it belongs to nobody) and what a user may do, so
// that a caller asking again, or about many objects, costs the API server
// one review each. Tokens are remembered by their SHA-256, never as they
// are. A review that could not be made is not remembered. It is safe for
// concurrent use.
type CachedReviewer struct {
	// Reviewer makes the reviews.
	Reviewer Reviewer
	// TTL is how long an answer is remembered; zero means
	// DefaultCacheTTL.
	TTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu     sync.Mutex
	users  map[[sha256.Size]byte]cachedUser
	access map[[sha256.Size]byte]cachedAccess
}

type cachedUser struct {
	user    authenticationv1.UserInfo
	err     error // the 401 of a rejected token
	expires time.Time
}

type cachedAccess struct {
	allowed bool
	expires time.Time
}

// Authenticate is Reviewer.Authenticate, remembered.
func (c *CachedReviewer) Authenticate(ctx context.Context, token string) (authenticationv1.UserInfo, error) {
	key := sha256.Sum256([]byte(token))
	c.mu.Lock()
	hit, ok := c.users[key]
	c.mu.Unlock()
	if ok && c.now().Before(hit.expires) {
		return hit.user, hit.err
	}
	return c.Refresh(ctx, token)
}

// Refresh is Reviewer.Authenticate, whatever is remembered, and remembers
// its answer: a long-lived caller (a page's event stream) checks its
// token is still valid with it.
func (c *CachedReviewer) Refresh(ctx context.Context, token string) (authenticationv1.UserInfo, error) {
	key := sha256.Sum256([]byte(token))
	now := c.now()
	user, err := c.Reviewer.Authenticate(ctx, token)
	var he *Error
	if err != nil && (!errors.As(err, &he) || he.Code >= 500) {
		return user, err // the review failed: ask again next time
	}
	c.mu.Lock()
	c.users = remember(c.users, key, cachedUser{user: user, err: err, expires: now.Add(c.ttl())}, now,
		func(v cachedUser) time.Time { return v.expires })
	c.mu.Unlock()
	return user, err
}

// Cached reports whether Authenticate would answer for token from memory.
func (c *CachedReviewer) Cached(token string) bool {
	key := sha256.Sum256([]byte(token))
	c.mu.Lock()
	defer c.mu.Unlock()
	hit, ok := c.users[key]
	return ok && c.now().Before(hit.expires)
}

// Allowed is Reviewer.Allowed, remembered per user (name, UID, groups and
// extra) and attributes: an allowance for TTL, a refusal for a fifth of
// it.
func (c *CachedReviewer) Allowed(ctx context.Context, user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (bool, error) {
	raw, err := json.Marshal(struct {
		User  authenticationv1.UserInfo
		Attrs authorizationv1.ResourceAttributes
	}{user, attrs})
	if err != nil {
		return false, err
	}
	key := sha256.Sum256(raw)
	now := c.now()
	c.mu.Lock()
	hit, ok := c.access[key]
	c.mu.Unlock()
	if ok && now.Before(hit.expires) {
		return hit.allowed, nil
	}
	allowed, err := c.Reviewer.Allowed(ctx, user, attrs)
	if err != nil {
		return false, err
	}
	ttl := c.ttl()
	if !allowed {
		// A refusal is remembered briefly: a binding just made should
		// take effect within seconds.
		ttl /= 5
	}
	c.mu.Lock()
	c.access = remember(c.access, key, cachedAccess{allowed: allowed, expires: now.Add(ttl)}, now,
		func(v cachedAccess) time.Time { return v.expires })
	c.mu.Unlock()
	return allowed, nil
}

func (c *CachedReviewer) ttl() time.Duration {
	if c.TTL > 0 {
		return c.TTL
	}
	return DefaultCacheTTL
}

func (c *CachedReviewer) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// remember stores v under key in m, keeping m within maxCached entries.
func remember[V any](m map[[sha256.Size]byte]V, key [sha256.Size]byte, v V, now time.Time, expires func(V) time.Time) map[[sha256.Size]byte]V {
	if m == nil {
		m = map[[sha256.Size]byte]V{}
	}
	if len(m) >= maxCached {
		for k, old := range m {
			if !now.Before(expires(old)) {
				delete(m, k)
			}
		}
		if len(m) >= maxCached {
			clear(m)
		}
	}
	m[key] = v
	return m
}
