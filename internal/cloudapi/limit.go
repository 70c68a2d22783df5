package cloudapi

import (
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/stackyard/stackyard/internal/authn"
)

// The cloud API's rate limits. Kargo's verification asks every few
// seconds per stage; these leave it room and bound what one caller can
// make the operator and the API server do.
const (
	// perUserRate and perUserBurst bound the requests of one
	// authenticated user.
	perUserRate  = rate.Limit(10)
	perUserBurst = 20
	// perAddressRate and perAddressBurst bound, per remote address, the
	// requests whose token is not in the review cache: each costs the API
	// server a TokenReview.
	perAddressRate  = rate.Limit(5)
	perAddressBurst = 10
	// limiterIdle is how long an unused limiter is kept.
	limiterIdle = 10 * time.Minute
)

// limiters holds a token bucket per key, dropping those unused for
// limiterIdle. It is safe for concurrent use.
type limiters struct {
	rate  rate.Limit
	burst int
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

func newLimiters(r rate.Limit, burst int, now func() time.Time) *limiters {
	return &limiters{rate: r, burst: burst, now: now, buckets: map[string]*bucket{}}
}

// allow takes a token from key's bucket, reporting whether there was one.
func (l *limiters) allow(key string) bool {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > limiterIdle {
		for k, b := range l.buckets {
			if now.Sub(b.used) > limiterIdle {
				delete(l.buckets, k)
			}
		}
		l.swept = now
	}
	b := l.buckets[key]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(l.rate, l.burst)}
		l.buckets[key] = b
	}
	b.used = now
	return b.lim.AllowN(now, 1)
}

// tooManyRequests is the answer past a limit.
func tooManyRequests(who string) error {
	return &authn.Error{Code: http.StatusTooManyRequests, Message: "Too Many Requests: slow down", Detail: "rate limit of " + who}
}

// remoteHost is the request's remote address without its port.
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
