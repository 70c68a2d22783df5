package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stackyard/stackyard/internal/runtime"
	"github.com/stackyard/stackyard/internal/source"
)

// sourceCacheDir is the cache's directory under the runtime's root. A
// namespace's name cannot begin with a dot, so it never meets a
// Workspace's state directory.
const sourceCacheDir = ".source-cache"

// DefaultSourceCacheEntries bounds the sources the cache keeps: enough for
// every Stack of a burst on a few repositories and commits.
const DefaultSourceCacheEntries = 64

// sourceCache keeps one copy of each immutable source fetched: a git
// commit given by its SHA, or an artifact given by its digest. When many
// Workspaces of a namespace deploy the same commit (a burst of Stacks on
// one branch, the stages of a pipeline), the first fetches it and the
// others copy the tree, sparing a process and a round trip to the
// repository each. Entries are per namespace, as credentials are: a
// Workspace never gets a tree fetched with another namespace's Secret.
// What a Workspace writes into its own copy (stack settings) never reaches
// the cache. The oldest entries are removed past max.
type sourceCache struct {
	dir string
	max int

	mu sync.Mutex // serializes store and evict

	fetching keyLocks // one fetch of a key at a time
}

// keyLocks holds a lock per key, for as long as someone holds or waits
// for it.
type keyLocks struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	held  chan struct{} // full while held
	users int           // holders and waiters
}

// lock takes key's lock, waiting until its holder releases it or ctx
// ends, and returns the function that releases it.
func (k *keyLocks) lock(ctx context.Context, key string) (func(), error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{held: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	done := func() {
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
	select {
	case l.held <- struct{}{}:
		return func() { <-l.held; done() }, nil
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
}

// lockFetch takes the lock of key's fetch (see sourceCache).
func (c *sourceCache) lockFetch(ctx context.Context, key string) (func(), error) {
	return c.fetching.lock(ctx, key)
}

// key returns the cache key of src for a Workspace of namespace, and
// false when src is not immutable (a branch, a local directory).
func (c *sourceCache) key(namespace string, src runtime.Source) (string, bool) {
	if c == nil || c.max <= 0 {
		return "", false
	}
	req := src.Request
	immutable := (req.Git != nil && source.IsCommit(req.Git.Commit)) || (req.Artifact != nil && req.Artifact.Digest != "")
	if !immutable {
		return "", false
	}
	h := sha256.Sum256([]byte(namespace + "\x00" + src.Fingerprint()))
	return hex.EncodeToString(h[:16]), true
}

// entry is where the tree and revision of key live.
func (c *sourceCache) entry(key string) string { return filepath.Join(c.dir, key) }

// restore copies the cached tree of key into target (replacing it only
// once the copy is complete) and returns its revision; false when the
// cache does not hold key or the copy failed, and the caller fetches.
func (c *sourceCache) restore(key, target string) (string, bool) {
	entry := c.entry(key)
	rev, err := os.ReadFile(filepath.Join(entry, "revision"))
	if err != nil {
		return "", false
	}
	tmp := target + ".restore-" + randomID()
	if err := copyTree(filepath.Join(entry, "tree"), tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return "", false
	}
	if err := replaceDir(tmp, target); err != nil {
		_ = os.RemoveAll(tmp)
		return "", false
	}
	now := time.Now()
	_ = os.Chtimes(entry, now, now) // recently used: evicted last
	return string(rev), true
}

// store keeps a copy of the freshly fetched tree at from under key. A
// failure only costs later fetches, so it is not reported.
func (c *sourceCache) store(key, from, revision string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	entry := c.entry(key)
	if _, err := os.Stat(entry); err == nil {
		return
	}
	tmp := filepath.Join(c.dir, ".tmp-"+randomID())
	err := copyTree(from, filepath.Join(tmp, "tree"))
	if err == nil {
		err = os.WriteFile(filepath.Join(tmp, "revision"), []byte(revision), 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, entry)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return
	}
	c.evict()
}

// evict removes the least recently used entries past max, and leftovers
// of copies a crash interrupted.
func (c *sourceCache) evict() {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	type aged struct {
		name string
		at   time.Time
	}
	var kept []aged
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Hour {
				_ = os.RemoveAll(filepath.Join(c.dir, e.Name()))
			}
			continue
		}
		if fi, err := e.Info(); err == nil {
			kept = append(kept, aged{e.Name(), fi.ModTime()})
		}
	}
	slices.SortFunc(kept, func(a, b aged) int { return b.at.Compare(a.at) })
	for _, e := range kept[min(len(kept), c.max):] {
		_ = os.RemoveAll(filepath.Join(c.dir, e.name))
	}
}

// replaceDir puts the directory tmp in place of target.
func replaceDir(tmp, target string) error {
	old := target + ".old-" + randomID()
	if err := os.Rename(target, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Rename(tmp, target); err != nil {
		return err
	}
	return os.RemoveAll(old)
}

// copyTree copies the directory tree at from to the new directory to:
// directories, regular files with their modes, and symbolic links as
// links.
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, info.Mode().Perm()|0o700)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, dst) //nolint:gosec // the operator's own source cache, which no program writes
		case d.Type().IsRegular():
			return copyFile(path, dst, info.Mode().Perm())
		default:
			return fmt.Errorf("%s: not a file, directory or link", path)
		}
	})
}

// copyFile copies the regular file from to the new file to.
func copyFile(from, to string, mode fs.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
