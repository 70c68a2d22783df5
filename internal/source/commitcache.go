package source

import (
	"context"
	"sync"
	"time"
)

// commitCache remembers described commits per repository and credentials.
// A commit never changes, so an entry is never stale; entries unused for
// pollRetention are swept so that the cache does not grow forever.
type commitCache struct {
	mu        sync.Mutex
	entries   map[commitKey]cachedCommit
	lastSweep time.Time
}

// commitKey is a commit of a repository as seen with some credentials
// (repo and creds as in pollKey).
type commitKey struct {
	repo, creds, sha string
}

// cachedCommit is a cache entry and when it was last used.
type cachedCommit struct {
	commit Commit
	used   time.Time
}

// get returns the commit sha of the repository poll names, if cached.
func (c *commitCache) get(poll pollKey, sha string, now time.Time) (Commit, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := commitKey{repo: poll.repo, creds: poll.creds, sha: sha}
	e, ok := c.entries[k]
	if ok {
		e.used = now
		c.entries[k] = e
	}
	return e.commit, ok
}

// chain returns the depth commits along first parents from head, all
// Diffed (or without parents), when every one of them is cached.
func (c *commitCache) chain(poll pollKey, head string, depth int, now time.Time) ([]Commit, bool) {
	var out []Commit
	for sha := head; len(out) < depth; {
		commit, ok := c.get(poll, sha, now)
		if !ok || (!commit.Diffed && len(commit.Parents) > 0) {
			return nil, false
		}
		out = append(out, commit)
		if len(commit.Parents) == 0 {
			break
		}
		sha = commit.Parents[0]
	}
	return out, true
}

// put caches commits, keeping a Diffed entry over one that is not, and
// sweeps entries unused for pollRetention at most once per pollRetention.
func (c *commitCache) put(poll pollKey, now time.Time, commits ...Commit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[commitKey]cachedCommit{}
	}
	for _, commit := range commits {
		k := commitKey{repo: poll.repo, creds: poll.creds, sha: commit.SHA}
		if old, ok := c.entries[k]; ok && old.commit.Diffed && !commit.Diffed {
			commit = old.commit
		}
		c.entries[k] = cachedCommit{commit: commit, used: now}
	}
	if now.Sub(c.lastSweep) < pollRetention {
		return
	}
	c.lastSweep = now
	for k, e := range c.entries {
		if now.Sub(e.used) > pollRetention {
			delete(c.entries, k)
		}
	}
}

// History returns History(ctx, repoURL, head.Name, auth, depth), answered
// without a fetch when the commits from head.Commit down were described
// before, by any caller with the same credentials: once discovered, a
// branch head costs many Pipelines one fetch, not one each. When head has
// moved since it was listed, the history of where it is now is returned.
func (p *Poller) History(ctx context.Context, repoURL string, head Ref, auth *GitAuth, depth int) ([]Commit, error) {
	key := p.key(repoURL, "", auth)
	if commits, ok := p.commits.chain(key, head.Commit, depth, p.now()); ok {
		return commits, nil
	}
	commits, err := History(ctx, repoURL, head.Name, auth, depth)
	if err != nil {
		return nil, err
	}
	p.commits.put(key, p.now(), commits...)
	return commits, nil
}

// Describe returns the commits refs point to, by SHA, as Describe does,
// fetching only those not described before with the same credentials. A
// ref that has moved since it was listed is described where it is now, so
// its listed commit may be missing from the result.
func (p *Poller) Describe(ctx context.Context, repoURL string, refs []Ref, auth *GitAuth) (map[string]Commit, error) {
	key := p.key(repoURL, "", auth)
	out := map[string]Commit{}
	var missing []string
	for _, r := range refs {
		if c, ok := p.commits.get(key, r.Commit, p.now()); ok {
			out[r.Commit] = c
		} else {
			missing = append(missing, r.Name)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	fetched, err := Describe(ctx, repoURL, missing, auth)
	if err != nil {
		return nil, err
	}
	for sha, c := range fetched {
		p.commits.put(key, p.now(), c)
		out[sha] = c
	}
	return out, nil
}
