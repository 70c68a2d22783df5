package local

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stackyard/stackyard/test/testenv"
)

// TestLeanAgentRefused: the lean agent stands in for `stackyard agent
// serve` only when it is as trusted as stackyard and the same build.
func TestLeanAgentRefused(t *testing.T) {
	// Two small Go binaries of the pinned tools stand for builds: one
	// plays stackyard and, copied, a lean agent of its build; the other a
	// lean agent of another build.
	body, err := os.ReadFile(filepath.Join(testenv.BinDir(), "protoc-gen-go"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := os.ReadFile(filepath.Join(testenv.BinDir(), "protoc-gen-go-grpc"))
	if err != nil {
		t.Fatal(err)
	}
	// install writes stackyard and a lean agent with the given content and
	// mode into a fresh directory of mode dirMode, and returns both paths.
	install := func(t *testing.T, lean []byte, mode, dirMode os.FileMode) (string, string) {
		dir := t.TempDir()
		stackyard := filepath.Join(dir, "stackyard")
		if err := os.WriteFile(stackyard, body, 0o755); err != nil {
			t.Fatal(err)
		}
		agent := filepath.Join(dir, LeanAgent)
		if lean != nil {
			if err := os.WriteFile(agent, lean, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(agent, mode); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(dir, dirMode); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
		return stackyard, agent
	}
	for name, tc := range map[string]struct {
		lean    []byte
		mode    os.FileMode
		dirMode os.FileMode
		want    string // "" means used
	}{
		"the same build":        {body, 0o755, 0o755, ""},
		"not installed":         {nil, 0, 0o755, "not installed"},
		"not executable":        {body, 0o644, 0o755, "not an executable file"},
		"writable by the group": {body, 0o775, 0o755, "writable by others"},
		"in a shared directory": {body, 0o755, 0o777, "its directory: writable by others"},
		"another build":         {other, 0o755, 0o755, "another build"},
		"no build information":  {[]byte("#!/bin/sh\n"), 0o755, 0o755, "no build information"},
	} {
		t.Run(name, func(t *testing.T) {
			stackyard, lean := install(t, tc.lean, tc.mode, tc.dirMode)
			got := leanAgentRefused(stackyard, lean)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("leanAgentRefused = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestLeanAgentLink: a lean agent that is a link is judged by the file it
// leads to and that file's directory.
func TestLeanAgentLink(t *testing.T) {
	body, err := os.ReadFile(filepath.Join(testenv.BinDir(), "protoc-gen-go"))
	if err != nil {
		t.Fatal(err)
	}
	safe, shared := t.TempDir(), t.TempDir()
	stackyard := filepath.Join(safe, "stackyard")
	target := filepath.Join(shared, LeanAgent)
	for _, f := range []string{stackyard, target} {
		if err := os.WriteFile(f, body, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	lean := filepath.Join(safe, LeanAgent)
	if err := os.Symlink(target, lean); err != nil {
		t.Fatal(err)
	}
	if got := leanAgentRefused(stackyard, lean); got != "" {
		t.Fatalf("a link into a safe directory: leanAgentRefused = %q, want it used", got)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(shared, 0o700) })
	if got := leanAgentRefused(stackyard, lean); !strings.Contains(got, "its directory: writable by others") {
		t.Errorf("a link into a shared directory: leanAgentRefused = %q, want it refused for the directory", got)
	}
}

// TestUnsafeFileOwner: a lean agent owned by someone other than
// stackyard's owner or root is refused.
func TestUnsafeFileOwner(t *testing.T) {
	own := fakeInfo{mode: 0o755, uid: 1000}
	for name, tc := range map[string]struct {
		fi   fakeInfo
		want string
	}{
		"stackyard's owner": {fakeInfo{mode: 0o755, uid: 1000}, ""},
		"root":              {fakeInfo{mode: 0o755, uid: 0}, ""},
		"someone else":      {fakeInfo{mode: 0o755, uid: 1001}, "owned by uid 1001"},
		"world-writable":    {fakeInfo{mode: 0o757, uid: 1000}, "writable by others"},
	} {
		t.Run(name, func(t *testing.T) {
			got := unsafeFile(tc.fi, own)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("unsafeFile = %q, want %q", got, tc.want)
			}
		})
	}
}

// fakeInfo is an os.FileInfo with an owner.
type fakeInfo struct {
	mode os.FileMode
	uid  uint32
}

func (f fakeInfo) Name() string       { return "f" }
func (f fakeInfo) Size() int64        { return 0 }
func (f fakeInfo) Mode() fs.FileMode  { return f.mode }
func (f fakeInfo) ModTime() time.Time { return time.Time{} }
func (f fakeInfo) IsDir() bool        { return false }
func (f fakeInfo) Sys() any           { return &syscall.Stat_t{Uid: f.uid} }
