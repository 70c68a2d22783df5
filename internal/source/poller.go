package source

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	neturl "net/url"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// DefaultPollTimeout bounds one shared remote query. It does not depend on
// any caller's context, since callers that give up must not cancel the
// query for the others waiting on it.
const DefaultPollTimeout = 2 * time.Minute

// pollRetention is how long a result is remembered after its query
// finished; older ones are swept so that rotated credentials and deleted
// stacks do not keep entries forever.
const pollRetention = time.Hour

// Poller finds the latest commit of git branches for many callers while
// asking each remote as little as possible: a thousand Stacks on the same
// repository and branch cause one `git ls-remote` per polling interval, not
// a thousand. Results are shared per (repository, branch, credentials), so
// callers with different credentials never see each other's answers;
// credentials enter the key only as a keyed hash. Refs shares the listing
// of every ref the same way, and History and Describe remember the commits
// they describe. The zero value is not usable: create one with NewPoller
// and share it. It is safe for concurrent use.
type Poller struct {
	lsRemote func(ctx context.Context, url, ref string, auth *GitAuth) (string, error)
	listRefs func(ctx context.Context, url string, auth *GitAuth) ([]Ref, error)
	timeout  time.Duration
	now      func() time.Time
	hashKey  []byte

	flights singleflight.Group

	mu        sync.Mutex
	results   map[pollKey]pollResult
	lastSweep time.Time

	// commits remembers described commits (see Describe and History),
	// which never change, under their own lock.
	commits commitCache
}

// pollKey identifies one shared query. creds is an HMAC of the credentials
// (and of any user info in the URL), never the credentials themselves.
type pollKey struct {
	repo, branch, creds string
	// all marks a query for every ref (Refs) rather than one branch.
	all bool
}

// String joins the key's fields for singleflight; none is secret.
func (k pollKey) String() string {
	s := strconv.Quote(k.repo) + " " + strconv.Quote(k.branch) + " " + k.creds
	if k.all {
		s += " all"
	}
	return s
}

// pollResult is the outcome of one query.
type pollResult struct {
	commit string
	// refs is the answer of a query for every ref; callers get copies.
	refs []Ref
	err  error
	// started is when the query began: the answer is at least that fresh.
	started time.Time
	// finished is when it was stored.
	finished time.Time
}

// NewPoller returns a Poller that queries remotes with LsRemote.
func NewPoller() *Poller {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &Poller{
		lsRemote: LsRemote,
		listRefs: ListRefs,
		timeout:  DefaultPollTimeout,
		now:      time.Now,
		hashKey:  key,
		results:  map[pollKey]pollResult{},
	}
}

// Latest returns the commit SHA branch points to in the repository at
// repoURL ("" means the remote's default branch), as LsRemote would, but
// answers from the result of an earlier query when that query started at
// most maxAge ago. Concurrent callers for the same key share one query in
// flight. Failures are shared and remembered the same way, so a broken
// remote is not hammered either; the error is LsRemote's (*Error). When ctx
// ends first, Latest returns ctx.Err() and the query goes on for the
// others.
func (p *Poller) Latest(ctx context.Context, repoURL, branch string, auth *GitAuth, maxAge time.Duration) (string, error) {
	r, err := p.shared(ctx, p.key(repoURL, branch, auth), maxAge, func(qctx context.Context) pollResult {
		var r pollResult
		r.commit, r.err = p.lsRemote(qctx, repoURL, branch, auth)
		return r
	})
	if err != nil {
		return "", err
	}
	return r.commit, r.err
}

// Key names what Latest shares for repoURL, branch and auth: equal keys
// get the same answers. It carries no secret (credentials enter it as a
// keyed hash), so callers may group by it.
func (p *Poller) Key(repoURL, branch string, auth *GitAuth) string {
	return p.key(repoURL, branch, auth).String()
}

// shared answers key from a result whose query started at most maxAge ago,
// or runs query once for all the callers that miss at the same time. The
// query runs under its own timeout, not under any caller's context; the
// error is ctx's when ctx ends first.
func (p *Poller) shared(ctx context.Context, key pollKey, maxAge time.Duration, query func(context.Context) pollResult) (pollResult, error) {
	missed := p.now()
	if r, ok := p.cached(key, func(r pollResult) bool { return missed.Sub(r.started) <= maxAge }); ok {
		return r, nil
	}
	ch := p.flights.DoChan(key.String(), func() (any, error) {
		// A query that finished after this caller looked is as fresh as
		// this one would be: it began no earlier than the caller's miss
		// minus its own duration, and its callers were waiting too.
		if r, ok := p.cached(key, func(r pollResult) bool { return !r.finished.Before(missed) }); ok {
			return r, nil
		}
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.timeout)
		defer cancel()
		started := p.now()
		r := query(qctx)
		r.started, r.finished = started, p.now()
		p.store(key, r)
		return r, nil
	})
	select {
	case res := <-ch:
		return res.Val.(pollResult), nil
	case <-ctx.Done():
		return pollResult{}, ctx.Err()
	}
}

// cached returns the stored result for key when fresh accepts it.
func (p *Poller) cached(key pollKey, fresh func(pollResult) bool) (pollResult, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.results[key]
	if !ok || !fresh(r) {
		return pollResult{}, false
	}
	return r, true
}

// store records r for key and, at most once per pollRetention, forgets
// results older than that.
func (p *Poller) store(key pollKey, r pollResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.results[key] = r
	if r.finished.Sub(p.lastSweep) < pollRetention {
		return
	}
	p.lastSweep = r.finished
	for k, old := range p.results {
		if r.finished.Sub(old.finished) > pollRetention {
			delete(p.results, k)
		}
	}
}

// key builds the sharing key: the URL without user info, the branch, and an
// HMAC (under a key that lives only in this process) of everything that
// authenticates: the URL's user info and every GitAuth field.
func (p *Poller) key(repoURL, branch string, auth *GitAuth) pollKey {
	repo, userinfo := repoURL, ""
	if u, err := neturl.Parse(repoURL); err == nil && u.User != nil {
		userinfo = u.User.String()
		u.User = nil
		repo = u.String()
	}
	h := hmac.New(sha256.New, p.hashKey)
	field := func(s string) { writeField(h, s) }
	field(userinfo)
	if auth != nil {
		field("auth")
		field(auth.Token)
		field(auth.Username)
		field(auth.Password)
		field(auth.SSHPrivateKey)
		field(auth.SSHPassphrase)
		field(auth.KnownHosts)
		if app := auth.GitHubApp; app != nil {
			field("app")
			field(app.AppID)
			field(strconv.FormatInt(app.InstallationID, 10))
			field(app.PrivateKey)
			field(app.APIURL)
		}
	}
	return pollKey{repo: repo, branch: branch, creds: hex.EncodeToString(h.Sum(nil))}
}

// writeField writes s length-prefixed, so that no two different field
// lists hash alike.
func writeField(h hash.Hash, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}
