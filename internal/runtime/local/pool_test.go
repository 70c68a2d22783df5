package local_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/internal/proc"
	"github.com/stackyard/stackyard/internal/runtime/local"
)

// waitWarm waits until rt holds n pre-started agents and returns their
// pids.
func waitWarm(t *testing.T, rt *local.Runtime, n int) []int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if pids := rt.WarmPIDs(); len(pids) >= n {
			return pids
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the runtime holds %v pre-started agents, want %d", rt.WarmPIDs(), n)
	return nil
}

// TestWarmAgents: a runtime pre-starts agents only once one is needed; a
// Workspace's next agent start binds one of them to the Workspace (its
// environment, Secrets' values among them, reaches the CLI, not the
// agent's command line or initial environment); an orphaned bound agent
// is recognised and reaped; the pool empties WarmFor after the last start,
// and when the runtime closes.
func TestWarmAgents(t *testing.T) {
	ns := newNamespace(t)
	// The root is reached through a symlink, as under a linked /home: the
	// kernel reports an agent's working directory resolved.
	root := filepath.Join(t.TempDir(), "root")
	if err := os.Symlink(t.TempDir(), root); err != nil {
		t.Fatal(err)
	}
	rt, exits := newRuntime(t, root, func(o *local.Options) { o.WarmFor = 3 * time.Second })
	if pids := rt.WarmPIDs(); len(pids) != 0 {
		t.Fatalf("a new runtime pre-started agents %v", pids)
	}
	first := localWorkspace(t, ns, "first")
	ensureReady(t, rt, first)
	if slices.Contains(proc.Cmdline(rt.PID(ns, first.Name)), "--await-spec") {
		t.Error("the first agent was pre-started, but the runtime had no reason to pre-start one")
	}
	warm := waitWarm(t, rt, local.DefaultWarmAgents)
	for _, pid := range warm {
		if cwd := proc.Cwd(pid); cwd != "/" {
			t.Errorf("pre-started agent %d works in %q, want /", pid, cwd)
		}
	}

	// A pre-started agent that dies before anyone takes it is dropped,
	// and replaced.
	dead := warm[len(warm)-1]
	if err := syscall.Kill(dead, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Once the runtime has seen it die, it no longer counts it as warm.
	for deadline := time.Now().Add(15 * time.Second); slices.Contains(rt.WarmPIDs(), dead); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the runtime still counts the killed pre-started agent %d", dead)
		}
	}

	second := localWorkspace(t, ns, "second")
	ensureReady(t, rt, second)
	pid := rt.PID(ns, second.Name)
	if pid != warm[0] {
		t.Fatalf("the second agent is %d, not the live pre-started %d", pid, warm[0])
	}
	// The pool refills at once: these are the agents WarmFor ends later.
	refilled := waitWarm(t, rt, local.DefaultWarmAgents)
	if slices.Contains(refilled, dead) || slices.Contains(refilled, pid) {
		t.Errorf("the pool holds %v: the dead %d or the bound %d", refilled, dead, pid)
	}
	dir := rt.StateDir(ns, second.Name)
	if !sameDir(proc.Cwd(pid), dir) {
		t.Errorf("the bound agent works in %q, want its state directory %s", proc.Cwd(pid), dir)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(environ), "pa55-second") || strings.Contains(string(environ), "PULUMI_BACKEND_URL") {
		t.Error("the Workspace's environment shows in the bound agent's initial environment")
	}
	if strings.Contains(strings.Join(proc.Cmdline(pid), " "), "pa55-second") {
		t.Error("the Workspace's passphrase shows in the bound agent's command line")
	}
	// Creating a stack needs the backend and the passphrase from the
	// Workspace's env: the CLI the bound agent runs has both.
	c := client(t, rt, second)
	if _, err := c.SelectStack(ctx(t), &agentpb.SelectStackRequest{StackName: "dev", Create: true}); err != nil {
		t.Fatalf("SelectStack on the bound agent: %v", err)
	}
	backend := strings.TrimPrefix(second.Spec.Env[0].Value, "file://")
	if _, err := os.Stat(filepath.Join(backend, ".pulumi")); err != nil {
		t.Errorf("the stack is not in the Workspace's backend: %v", err)
	}

	// A bound agent left by another runtime over the same root is an
	// orphan of the state directory, recognised by its working directory.
	other, _ := newRuntime(t, root, func(o *local.Options) { o.WarmAgents = -1 })
	ensureReady(t, other, second)
	waitGone(t, pid)
	if other.PID(ns, second.Name) == pid {
		t.Fatal("the orphaned bound agent was adopted instead of replaced")
	}
	// To rt, which bound it, the agent died unasked.
	select {
	case key := <-exits:
		if key != ns+"/"+second.Name {
			t.Errorf("an exit was reported for %s, want %s/%s", key, ns, second.Name)
		}
	case <-time.After(10 * time.Second):
		t.Error("the bound agent's exit was not reported to the runtime that bound it")
	}
	if len(other.WarmPIDs()) != 0 {
		t.Errorf("WarmAgents -1 pre-started %v", other.WarmPIDs())
	}

	// WarmFor after the last start, the pool is empty and its agents gone.
	for _, p := range refilled {
		waitGone(t, p)
	}
	if pids := rt.WarmPIDs(); len(pids) != 0 {
		t.Errorf("after WarmFor the pool holds %v", pids)
	}
	// A start fills it again; closing the runtime ends its agents.
	if err := rt.Idle(ctx(t), first); err != nil {
		t.Fatal(err)
	}
	ensureReady(t, rt, first)
	left := waitWarm(t, rt, local.DefaultWarmAgents)
	rt.Close()
	for _, p := range left {
		if proc.Alive(p) {
			t.Errorf("pre-started agent %d outlives Close", p)
		}
	}
}

// sameDir reports whether a and b name one directory.
func sameDir(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}
