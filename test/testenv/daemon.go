package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stackyard/stackyard/internal/proc"
)

// daemonStopGrace is how long a daemon has to exit after SIGTERM before it
// is killed.
const daemonStopGrace = 10 * time.Second

// daemonLogLines is how much of a daemon's output a failed test shows.
const daemonLogLines = 200

// Daemon is a long-running program from BinDir that a test started: a
// server or a controller the code under test talks to, run as its own
// process exactly as it runs in production.
type Daemon struct {
	// Name is the binary's name in BinDir.
	Name string

	cmd    *exec.Cmd
	output SyncBuffer
	exited chan struct{}
	err    error // how the process exited; read after exited is closed
	// stopped is set by Stop: the test ended the daemon on purpose.
	stopped bool
}

// ErrAddressInUse is what AwaitHTTP returns when the daemon could not
// listen on the address it was given: another process took the port
// FreeAddr found free. Start the daemon again on another address.
var ErrAddressInUse = errors.New("the daemon's address was taken by another process")

// StartDaemon starts BinDir()/name with args, in this process's environment
// plus env ("NAME=value" entries), and stops it when the test ends: SIGTERM,
// then SIGKILL after a grace period; the kernel kills it too if the test
// process dies first. When the test has failed, the end of the daemon's
// output is logged. The test fails at once when the binary is missing.
func StartDaemon(t testing.TB, name string, args, env []string) *Daemon {
	t.Helper()
	if err := RequireBinaries(name); err != nil {
		t.Fatal(err)
	}
	return startDaemon(t, name, filepath.Join(BinDir(), name), args, env)
}

// StartSystemDaemon is StartDaemon for a program the system provides, not
// BinDir (Debian's redis-server): path is absolute, or looked up in PATH.
// The test fails at once when it is missing, naming install, the command
// that installs it.
func StartSystemDaemon(t testing.TB, path, install string, args, env []string) *Daemon {
	t.Helper()
	full, err := exec.LookPath(path)
	if err != nil {
		t.Fatalf("%s is not installed (%v): run %s", path, err, install)
	}
	return startDaemon(t, filepath.Base(full), full, args, env)
}

// startDaemon starts the program at path, named name in messages.
func startDaemon(t testing.TB, name, path string, args, env []string) *Daemon {
	t.Helper()
	d := &Daemon{Name: name, exited: make(chan struct{})}
	d.cmd = exec.Command(path, args...)
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.Stdout = &d.output
	d.cmd.Stderr = &d.output
	d.cmd.SysProcAttr = proc.GroupAttr()
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		if d.stopped {
			return
		}
		if err := d.stop(); err != nil {
			t.Errorf("stopping %s: %v", name, err)
		}
		if t.Failed() {
			t.Logf("--- the last lines of %s's output ---\n%s", name, d.Tail(daemonLogLines))
		}
	})
	return d
}

// stop ends the process unless it has exited already.
func (d *Daemon) stop() error {
	select {
	case <-d.exited:
		return fmt.Errorf("%s had exited before the test ended: %v", d.Name, d.err)
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
		return nil
	case <-time.After(daemonStopGrace):
	}
	_ = d.cmd.Process.Kill()
	<-d.exited
	return fmt.Errorf("%s did not exit within %s of SIGTERM and was killed", d.Name, daemonStopGrace)
}

// Stop ends the daemon before the test does (one that lost its address,
// to start another): SIGTERM, then SIGKILL after the grace period.
func (d *Daemon) Stop() {
	d.stopped = true
	_ = d.stop() // an exit before, or a kill after the grace, is expected here
}

// Output returns everything the daemon has written to stdout and stderr.
func (d *Daemon) Output() string { return d.output.String() }

// Tail returns the last n lines of the daemon's output.
func (d *Daemon) Tail(n int) string {
	lines := strings.Split(strings.TrimRight(d.Output(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// WaitHTTP waits until a GET of url answers with a status that ready
// accepts, failing the test when the daemon exits first or timeout passes.
func (d *Daemon) WaitHTTP(t testing.TB, url string, ready func(status int) bool, timeout time.Duration) {
	t.Helper()
	if err := d.AwaitHTTP(url, ready, timeout); err != nil {
		t.Fatalf("%v\n%s", err, d.Tail(daemonLogLines))
	}
}

// AwaitHTTP is WaitHTTP returning the failure instead: ErrAddressInUse
// (wrapped) when the daemon says it could not listen because its address
// is taken, which a caller can answer by starting it on another one.
func (d *Daemon) AwaitHTTP(url string, ready func(status int) bool, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	var last error
	for {
		select {
		case <-d.exited:
			if strings.Contains(d.Output(), "address already in use") {
				return fmt.Errorf("%s exited before serving %s: %w", d.Name, url, ErrAddressInUse)
			}
			return fmt.Errorf("%s exited before serving %s: %v", d.Name, url, d.err)
		default:
		}
		resp, err := client.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if ready(resp.StatusCode) {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		last = err
		if strings.Contains(d.Output(), "address already in use") {
			return fmt.Errorf("%s does not serve %s: %w", d.Name, url, ErrAddressInUse)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not serve %s after %s: %v", d.Name, url, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// maxAddressAttempts is how many times StartListening starts a daemon
// whose address another process took first.
const maxAddressAttempts = 3

// StartListening starts a daemon that listens on n addresses FreeAddr
// finds free, and waits until it serves: start starts it on addrs and
// waits (StartDaemon, then AwaitHTTP). Another process can take a port
// between FreeAddr and the daemon's bind; when that happens
// (ErrAddressInUse), the daemon is stopped and started again on new
// addresses, up to three times. It returns the daemon and the addresses
// it serves on.
func StartListening(t testing.TB, n int, start func(addrs []string) (*Daemon, error)) (*Daemon, []string) {
	t.Helper()
	return StartListeningFrom(t, n, FreeAddr, start)
}

// StartListeningFrom is StartListening taking its addresses from free
// (FreeAddr; a test of the retry hands out a taken one).
func StartListeningFrom(t testing.TB, n int, free func(testing.TB) string, start func(addrs []string) (*Daemon, error)) (*Daemon, []string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		addrs := make([]string, n)
		for i := range addrs {
			addrs[i] = free(t)
		}
		d, err := start(addrs)
		if err == nil {
			return d, addrs
		}
		if d == nil || !errors.Is(err, ErrAddressInUse) || attempt == maxAddressAttempts {
			tail := ""
			if d != nil {
				tail = d.Tail(daemonLogLines)
			}
			t.Fatalf("%v\n%s", err, tail)
		}
		t.Logf("%s: %v (attempt %d); starting it on other addresses", d.Name, err, attempt)
		d.Stop()
	}
}

// FreeAddr returns a loopback address whose port is free now, for a daemon
// told where to listen. Another process could take the port before the
// daemon does; on a test machine that is rare enough to fail the test.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Fatalf("finding a free port: %v", err)
	}
	return addr
}
