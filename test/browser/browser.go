// Package browser runs real-browser checks from Go tests: a test serves a page
// (usually with httptest) and calls Run with a Node script in this directory,
// which drives Debian's Chromium through playwright-core (see lib.mjs).
//
// `make test` installs what it needs through mk/browser.mk; to run such tests
// with plain `go test`, run `make browser-tools` once. A missing Chromium or
// node_modules fails the test: browser tests are never skipped.
package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Chromium is the browser the scripts drive: Debian's chromium package.
const Chromium = "/usr/bin/chromium"

// deadlineMargin is how long before the test's deadline a script still
// running is stopped, so the test can report its output instead of being
// killed by the test binary's timeout.
const deadlineMargin = 5 * time.Second

// killGrace is how long a stopped script gets, after SIGTERM, to close its
// browser before it and its process tree are killed.
const killGrace = 2 * time.Second

// Dir returns the absolute path of this directory (test/browser), found from
// this source file so that it works from any package's test.
func Dir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("browser: runtime.Caller failed")
	}
	return filepath.Dir(file)
}

// Run runs `node <script>`, the script's path being relative to Dir, with env
// added to the test's environment together with CHROMIUM=/usr/bin/chromium.
// Each line the script prints (stdout and stderr) goes to t.Log as it comes.
// The test fails, with the script's whole output, when node exits non-zero.
// A script still running a few seconds before the test's deadline is stopped
// with its process tree (node and the browser it launched).
func Run(t testing.TB, script string, env map[string]string) {
	t.Helper()
	dir := Dir()
	if !filepath.IsAbs(dir) {
		t.Fatalf("browser: cannot find test/browser from %q (built with -trimpath?)", dir)
	}
	if err := checkInstalled(dir); err != nil {
		t.Fatalf("browser test cannot run: %v; run `make browser-tools` (or `make test`, which does it)", err)
	}

	ctx := t.Context()
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if deadline, ok := d.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, deadline.Add(-deadlineMargin))
			defer cancel()
		}
	}

	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = dir
	// FORCE_COLOR=0: no terminal colour codes in Playwright's messages.
	cmd.Env = append(os.Environ(), "CHROMIUM="+Chromium, "FORCE_COLOR=0")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out := &lineLogger{t: t}
	cmd.Stdout = out
	cmd.Stderr = out
	// node gets its own process group; Playwright starts Chromium detached
	// (in a group of its own), so the tree is found through /proc as well.
	// SIGTERM lets Playwright close Chromium and delete its temporary
	// profile, but node itself does not exit on it: SIGKILL follows.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		pids := append(descendants(cmd.Process.Pid), cmd.Process.Pid)
		t.Logf("browser: stopping %s and its process tree %v: %v", script, pids, context.Cause(ctx))
		signalAll(cmd.Process.Pid, pids, syscall.SIGTERM)
		go func() {
			time.Sleep(killGrace)
			signalAll(cmd.Process.Pid, pids, syscall.SIGKILL)
		}()
		return nil
	}
	// Wait returns at most this long after the cancel even if a grandchild
	// still holds the output pipe.
	cmd.WaitDelay = killGrace + time.Second

	start := time.Now()
	err := cmd.Run()
	out.flush()
	if err != nil {
		t.Fatalf("node %s failed after %s: %v\n--- output ---\n%s", script,
			time.Since(start).Round(time.Millisecond), err, out.all())
	}
}

// checkInstalled reports what `make browser-tools` would have to install:
// node, Chromium, or test/browser/node_modules in the version the lock pins.
func checkInstalled(dir string) error {
	if _, err := exec.LookPath("node"); err != nil {
		return fmt.Errorf("node is not on PATH: %w", err)
	}
	if fi, err := os.Stat(Chromium); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is missing or not executable", Chromium)
	}
	var lock struct {
		Packages map[string]struct{ Version string } `json:"packages"`
	}
	var installed struct{ Version string }
	if err := readJSON(filepath.Join(dir, "package-lock.json"), &lock); err != nil {
		return err
	}
	want := lock.Packages["node_modules/playwright-core"].Version
	if want == "" {
		return errors.New("package-lock.json pins no playwright-core")
	}
	if err := readJSON(filepath.Join(dir, "node_modules", "playwright-core", "package.json"), &installed); err != nil {
		return fmt.Errorf("playwright-core is not installed in %s/node_modules: %w", dir, err)
	}
	if installed.Version != want {
		return fmt.Errorf("node_modules has playwright-core %s, package-lock.json pins %s", installed.Version, want)
	}
	return nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// descendants lists the processes below pid, read from /proc/*/stat.
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command, which is in parentheses: state ppid ...
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// signalAll sends sig to node's process group and to each of pids.
func signalAll(pgid int, pids []int, sig syscall.Signal) {
	_ = syscall.Kill(-pgid, sig)
	for _, p := range pids {
		_ = syscall.Kill(p, sig)
	}
}

// lineLogger passes each complete line written to it to t.Log and keeps the
// whole output for the failure message.
type lineLogger struct {
	t       testing.TB
	mu      sync.Mutex
	partial []byte
	buf     bytes.Buffer
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.t.Log(string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.t.Log(string(l.partial))
		l.partial = nil
	}
}

func (l *lineLogger) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
