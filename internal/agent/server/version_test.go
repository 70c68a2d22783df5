package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCLIVersionCached checks that the version of a pulumi binary is asked
// once and then read from the cache, and asked again once the binary is
// replaced.
func TestCLIVersionCached(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	bin := filepath.Join(dir, "pulumi")
	write := func(version string) {
		t.Helper()
		script := "#!/bin/sh\necho x >> " + calls + "\necho " + version + "\n"
		tmp := bin + ".new"
		if err := os.WriteFile(tmp, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, bin); err != nil {
			t.Fatal(err)
		}
	}
	asked := func() int {
		b, _ := os.ReadFile(calls)
		return strings.Count(string(b), "x")
	}
	check := func(what, want string, wantAsked int) {
		t.Helper()
		v, err := cliVersion(bin)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if v.String() != want || asked() != wantAsked {
			t.Errorf("%s: version %s, binary asked %d times; want %s, %d", what, v, asked(), want, wantAsked)
		}
	}

	write("v3.170.0")
	check("first agent", "3.170.0", 1)
	check("second agent", "3.170.0", 1)
	// A new binary in its place (an upgrade): asked again.
	time.Sleep(10 * time.Millisecond)
	write("v3.171.0")
	check("after an upgrade", "3.171.0", 2)
	check("the agent after that", "3.171.0", 2)

	// Without a cache directory it asks every time.
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	check("no cache directory", "3.171.0", 3)
	check("no cache directory, again", "3.171.0", 4)
}
