package dashboard

import (
	"sync"
	"time"
)

// ttlCache remembers answers for a while: the TokenReviews and
// SubjectAccessReviews a page and its live updates would otherwise ask the
// API server for on every request. It holds at most maxEntries; when full,
// it drops what expired, or else everything.
type ttlCache[K comparable, V any] struct {
	ttl        time.Duration
	maxEntries int

	mu      sync.Mutex
	entries map[K]ttlEntry[V]
}

type ttlEntry[V any] struct {
	value   V
	expires time.Time
}

// get returns the value stored for key, if it has not expired at now.
func (c *ttlCache[K, V]) get(key K, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// put stores value for key until now plus the cache's TTL.
func (c *ttlCache[K, V]) put(key K, value V, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[K]ttlEntry[V]{}
	}
	if len(c.entries) >= c.maxEntries {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= c.maxEntries {
			clear(c.entries)
		}
	}
	c.entries[key] = ttlEntry[V]{value: value, expires: now.Add(c.ttl)}
}
