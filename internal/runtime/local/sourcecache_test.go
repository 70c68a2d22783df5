package local

import (
	"context"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/stackyard/stackyard/internal/runtime"
	"github.com/stackyard/stackyard/internal/source"
)

const commitA = "0123456789abcdef0123456789abcdef01234567"

func TestSourceCacheKey(t *testing.T) {
	c := &sourceCache{dir: t.TempDir(), max: 4}
	git := func(commit, branch string) runtime.Source {
		return runtime.Source{Kind: runtime.SourceGit, Request: source.Request{Git: &source.GitRequest{URL: "https://git.example/p.git", Commit: commit, Branch: branch}}}
	}
	artifact := func(digest string) runtime.Source {
		return runtime.Source{Kind: runtime.SourceFlux, Request: source.Request{Artifact: &source.ArtifactSpec{URL: "http://a/p.tar.gz", Digest: digest}}}
	}
	for _, tt := range []struct {
		name      string
		src       runtime.Source
		cacheable bool
	}{
		{"a commit", git(commitA, ""), true},
		{"a branch", git("", "main"), false},
		{"the default branch", git("", ""), false},
		{"an artifact by digest", artifact("sha256:" + commitA + commitA[:24]), true},
		{"an artifact without digest", artifact(""), false},
		{"a local directory", runtime.Source{Kind: runtime.SourceLocal, Dir: "/src"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := c.key("team-a", tt.src); ok != tt.cacheable {
				t.Fatalf("cacheable = %v, want %v", ok, tt.cacheable)
			}
		})
	}
	a, _ := c.key("team-a", git(commitA, ""))
	b, _ := c.key("team-b", git(commitA, ""))
	if a == b {
		t.Fatal("two namespaces share a cache entry: a tree fetched with one's credentials would reach the other")
	}
	if _, ok := (&sourceCache{dir: t.TempDir(), max: -1}).key("team-a", git(commitA, "")); ok {
		t.Fatal("a disabled cache gave a key")
	}
}

func TestSourceCacheRestoreAndEvict(t *testing.T) {
	root := t.TempDir()
	c := &sourceCache{dir: filepath.Join(root, sourceCacheDir), max: 2}
	fetched := filepath.Join(root, "ws1", "source")
	for path, content := range map[string]string{"infra/Pulumi.yaml": "name: p\n", "run.sh": "#!/bin/sh\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(fetched, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(fetched, path), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(fetched, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("infra/Pulumi.yaml", filepath.Join(fetched, "link")); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.restore("k1", filepath.Join(root, "ws2", "source")); ok {
		t.Fatal("restored what was never stored")
	}
	c.store("k1", fetched, commitA)
	// What a Workspace writes into its copy afterwards stays its own.
	if err := os.WriteFile(filepath.Join(fetched, "infra", "Pulumi.dev.yaml"), []byte("config: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	target := filepath.Join(root, "ws2", "source")
	if err := os.MkdirAll(filepath.Join(target, "stale"), 0o755); err != nil {
		t.Fatal(err)
	}
	rev, ok := c.restore("k1", target)
	if !ok || rev != commitA {
		t.Fatalf("restore = %q, %v", rev, ok)
	}
	if b, err := os.ReadFile(filepath.Join(target, "infra", "Pulumi.yaml")); err != nil || string(b) != "name: p\n" {
		t.Fatalf("restored Pulumi.yaml = %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(target, "run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("run.sh lost its mode: %v, %v", fi, err)
	}
	if link, err := os.Readlink(filepath.Join(target, "link")); err != nil || link != "infra/Pulumi.yaml" {
		t.Fatalf("link = %q, %v", link, err)
	}
	for _, gone := range []string{"stale", "infra/Pulumi.dev.yaml"} {
		if _, err := os.Stat(filepath.Join(target, gone)); !os.IsNotExist(err) {
			t.Errorf("%s is in the restored tree", gone)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(root, "ws2", "source.*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}

	// Past max, the least recently used entries go; a restore counts as use.
	c.store("k2", fetched, commitA)
	old := time.Now().Add(-time.Hour)
	_ = os.Chtimes(c.entry("k1"), old, old)
	_ = os.Chtimes(c.entry("k2"), old.Add(time.Minute), old.Add(time.Minute))
	if _, ok := c.restore("k1", target); !ok {
		t.Fatal("k1 not restored")
	}
	c.store("k3", fetched, commitA)
	for key, want := range map[string]bool{"k1": true, "k2": false, "k3": true} {
		if _, err := os.Stat(c.entry(key)); (err == nil) != want {
			t.Errorf("entry %s kept = %v, want %v", key, err == nil, want)
		}
	}
}

// TestKeyLocks: one holder per key, other keys free, a waiter that gives
// up leaves nothing behind, and a released key is forgotten.
func TestKeyLocks(t *testing.T) {
	var k keyLocks
	unlockA, err := k.lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	unlockB, err := k.lock(context.Background(), "b")
	if err != nil {
		t.Fatalf("another key waited for a: %v", err)
	}
	unlockB()

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := k.lock(cancelled, "a"); err == nil {
		t.Fatal("a second holder of a got the lock")
	}

	got := make(chan func())
	go func() {
		unlock, err := k.lock(context.Background(), "a")
		if err != nil {
			t.Error(err)
		}
		got <- unlock
	}()
	// Once the waiter has registered, it can only be blocked: a's
	// channel is full until unlockA.
	for users := 0; users < 2; {
		k.mu.Lock()
		users = k.locks["a"].users
		k.mu.Unlock()
		goruntime.Gosched()
	}
	select {
	case <-got:
		t.Fatal("a waiter got a while it was held")
	default:
	}
	unlockA()
	(<-got)()

	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.locks) != 0 {
		t.Fatalf("released keys are still held: %v", k.locks)
	}
}
