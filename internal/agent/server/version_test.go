package server

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeCLI is a stand-in for the pulumi binary that answers `version` with
// $FAKE_VERSION and counts its runs in $FAKE_CALLS.
const fakeCLI = `package main

import (
	"fmt"
	"os"
)

func main() {
	if f, err := os.OpenFile(os.Getenv("FAKE_CALLS"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		_, _ = f.WriteString("x")
		_ = f.Close()
	}
	fmt.Println(os.Getenv("FAKE_VERSION"))
}
`

// TestCLIVersionCached checks that the version of a pulumi binary is asked
// once and then read from the cache, asked again once the binary changes,
// and always asked of a script (a version manager's shim) or without a
// cache directory.
func TestCLIVersionCached(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	t.Setenv("FAKE_CALLS", calls)
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte(fakeCLI), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "pulumi")
	build := exec.Command("go", "build", "-o", bin, src)
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	asked := func() int {
		b, _ := os.ReadFile(calls)
		return strings.Count(string(b), "x")
	}
	check := func(what, path, want string, wantAsked int) {
		t.Helper()
		v, err := cliVersion(path)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if v.String() != want || asked() != wantAsked {
			t.Errorf("%s: version %s, binary asked %d times; want %s, %d", what, v, asked(), want, wantAsked)
		}
	}

	t.Setenv("FAKE_VERSION", "v3.170.0")
	check("first agent", bin, "3.170.0", 1)
	check("second agent", bin, "3.170.0", 1)
	// The binary replaced (its modification time changes): asked again.
	t.Setenv("FAKE_VERSION", "v3.171.0")
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(bin, later, later); err != nil {
		t.Fatal(err)
	}
	check("after an upgrade", bin, "3.171.0", 2)
	check("the agent after that", bin, "3.171.0", 2)

	// A script is asked every time: what it runs may change under it.
	shim := filepath.Join(dir, "shim")
	if err := os.WriteFile(shim, []byte("#!/bin/sh\nexec "+bin+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	check("a shim", shim, "3.171.0", 3)
	check("a shim, again", shim, "3.171.0", 4)

	// So is any binary without a cache directory.
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	if err := os.Chtimes(bin, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	check("no cache directory", bin, "3.171.0", 5)
	check("no cache directory, again", bin, "3.171.0", 6)
}
