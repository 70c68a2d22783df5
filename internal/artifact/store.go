package artifact

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// ErrNotFound is wrapped by the error Get returns for an artifact that is
// not in the store.
var ErrNotFound = errors.New("artifact not found")

// tempPrefix starts the name of every file being written. No revision can
// start with it, so a half-written file is never served nor listed.
const tempPrefix = ".tmp-"

// staleTemp is how old a temporary file must be before GarbageCollect
// removes it: it was left behind by a writer that crashed.
const staleTemp = time.Hour

// Store keeps artifacts in a directory, one file per (key, revision), and
// computes the URLs under which a Server publishes them.
type Store struct {
	root    *os.Root
	dir     string
	baseURL *url.URL

	mu    sync.Mutex
	locks map[Key]*sync.Mutex
}

// NewStore opens (creating it if needed) the storage directory dir.
// baseURL is the advertised address of the Server in front of the store,
// e.g. "http://stackyard.stackyard-system.svc.cluster.local:9090": the URL
// of an artifact is baseURL followed by its Path.
func NewStore(dir, baseURL string) (*Store, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("artifact base URL %q: must be an http(s) URL without credentials, query or fragment", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the artifact directory: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening the artifact directory: %w", err)
	}
	return &Store{root: root, dir: dir, baseURL: u, locks: map[Key]*sync.Mutex{}}, nil
}

// Close releases the storage directory. The store must not be used after.
func (s *Store) Close() error { return s.root.Close() }

// Dir returns the storage directory.
func (s *Store) Dir() string { return s.dir }

// URL returns the address at which the Server publishes the artifact at the
// relative path p (as returned by Path).
func (s *Store) URL(p string) string {
	return s.baseURL.JoinPath(p).String()
}

// lock serializes the writers of one key, so that a garbage collection
// never removes a revision being written for the same object.
func (s *Store) lock(k Key) func() {
	s.mu.Lock()
	l, ok := s.locks[k]
	if !ok {
		l = &sync.Mutex{}
		s.locks[k] = l
	}
	s.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Put stores content as the artifact of revision of k, replacing any
// earlier file of that revision, and returns its description: path, URL,
// revision, digest, size and the time it was written. The content is
// written to a temporary file, synced and renamed into place, so readers
// see either the old file or the complete new one.
func (s *Store) Put(k Key, revision string, content io.Reader) (*pulumiv1.Artifact, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	if err := ValidateRevision(revision); err != nil {
		return nil, err
	}
	defer s.lock(k)()
	if err := s.root.MkdirAll(k.dir(), 0o755); err != nil {
		return nil, fmt.Errorf("creating the directory of %s: %w", k, err)
	}
	tmp, err := s.writeTemp(k, content)
	if err != nil {
		return nil, err
	}
	p := Path(k, revision)
	if err := s.root.Rename(tmp, p); err != nil {
		_ = s.root.Remove(tmp)
		return nil, fmt.Errorf("storing %s: %w", p, err)
	}
	return s.describe(p, revision)
}

// writeTemp writes content to a new temporary file in k's directory and
// returns the file's relative path.
func (s *Store) writeTemp(k Key, content io.Reader) (string, error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(k.dir(), tempPrefix+hex.EncodeToString(rnd[:]))
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", fmt.Errorf("creating a temporary file for %s: %w", k, err)
	}
	_, err = io.Copy(f, content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = s.root.Remove(tmp)
		return "", fmt.Errorf("writing the artifact of %s: %w", k, err)
	}
	return tmp, nil
}

// Get describes the stored artifact of revision of k, reading the file to
// compute its digest, or returns an error wrapping ErrNotFound.
func (s *Store) Get(k Key, revision string) (*pulumiv1.Artifact, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	if err := ValidateRevision(revision); err != nil {
		return nil, err
	}
	return s.describe(Path(k, revision), revision)
}

// describe reads the file at p and returns its artifact description.
func (s *Store) describe(p, revision string) (*pulumiv1.Artifact, error) {
	f, err := s.root.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", p, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", p, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file: %w", p, ErrNotFound)
	}
	digest, size, err := Digest(f)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	return &pulumiv1.Artifact{
		Path:           p,
		URL:            s.URL(p),
		Revision:       revision,
		Digest:         digest,
		Size:           &size,
		LastUpdateTime: metav1.NewTime(info.ModTime().UTC().Truncate(time.Second)),
	}, nil
}

// Revisions lists the revisions of k in the store, sorted.
func (s *Store) Revisions(k Key) ([]string, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	revs, _, err := s.list(k)
	return revs, err
}

// list returns the revisions and the temporary files in k's directory.
func (s *Store) list(k Key) (revisions []string, temps []fs.DirEntry, err error) {
	d, err := s.root.Open(k.dir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listing %s: %w", k, err)
	}
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil {
		return nil, nil, fmt.Errorf("listing %s: %w", k, err)
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, tempPrefix) {
			temps = append(temps, e)
			continue
		}
		if rev, ok := strings.CutSuffix(name, Suffix); ok && e.Type().IsRegular() && ValidateRevision(rev) == nil {
			revisions = append(revisions, rev)
		}
	}
	slices.Sort(revisions)
	return revisions, temps, nil
}

// GarbageCollect removes every artifact of k whose revision is not in keep
// (callers keep the current revision and the previous one, which
// workspaces may still be downloading), together with temporary files that
// crashed writers left behind more than an hour ago. It returns the
// revisions removed.
func (s *Store) GarbageCollect(k Key, keep ...string) ([]string, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	defer s.lock(k)()
	revs, temps, err := s.list(k)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, rev := range revs {
		if slices.Contains(keep, rev) {
			continue
		}
		if err := s.root.Remove(Path(k, rev)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, rev)
	}
	for _, t := range temps {
		if info, err := t.Info(); err == nil && time.Since(info.ModTime()) > staleTemp {
			_ = s.root.Remove(path.Join(k.dir(), t.Name()))
		}
	}
	return removed, errors.Join(errs...)
}

// Remove deletes every artifact of k, when the object is deleted. Removing
// the artifacts of a key that has none is not an error.
func (s *Store) Remove(k Key) error {
	if err := k.Validate(); err != nil {
		return err
	}
	defer s.lock(k)()
	if err := s.root.RemoveAll(k.dir()); err != nil {
		return fmt.Errorf("removing the artifacts of %s: %w", k, err)
	}
	return nil
}
