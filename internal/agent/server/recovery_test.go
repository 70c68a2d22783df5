package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/test/testenv"
	"google.golang.org/protobuf/proto"
)

// agentProcess is `stackyard agent serve` running as a subprocess.
type agentProcess struct {
	cmd    *exec.Cmd
	addr   string
	stderr *testenv.SyncBuffer
	exited chan struct{}
	err    error
}

// startAgent starts the agent binary over dir, with env added to its
// environment, and reads the address it prints as its first line.
func startAgent(t *testing.T, dir, backend, tokenFile string, env ...string) *agentProcess {
	t.Helper()
	a := &agentProcess{stderr: &testenv.SyncBuffer{}, exited: make(chan struct{})}
	a.cmd = exec.Command(stackyardBin, "agent", "serve", "--workspace", dir, "--token-file", tokenFile, "--grace-period", "3s")
	a.cmd.Env = append(append(os.Environ(), "PULUMI_BACKEND_URL=file://"+backend), env...)
	a.cmd.Stderr = a.stderr
	stdout, err := a.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		a.err = a.cmd.Wait()
		close(a.exited)
	}()
	t.Cleanup(func() {
		_ = a.cmd.Process.Kill()
		<-a.exited
		if t.Failed() {
			t.Logf("agent %d stderr:\n%s", a.cmd.Process.Pid, a.stderr.String())
		}
	})
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		if s.Scan() {
			line <- s.Text()
		}
		close(line)
	}()
	select {
	case addr, ok := <-line:
		if !ok || addr == "" {
			t.Fatalf("the agent printed no address; stderr:\n%s", a.stderr.String())
		}
		a.addr = addr
	case <-time.After(30 * time.Second):
		t.Fatalf("the agent did not print its address; stderr:\n%s", a.stderr.String())
	}
	return a
}

// running reports whether pid is a live process (not gone, not a zombie).
func running(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(st, ')')
	return i < 0 || !bytes.HasPrefix(st[i+1:], []byte(" Z"))
}

// lockFiles returns the stack's lock files in a file:// backend.
func lockFiles(t *testing.T, backend, project string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(backend, ".pulumi", "locks", "organization", project, "dev", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestAgentKilledMidUpRecovers kills the agent process with SIGKILL while
// an Up is creating a resource. The CLI dies with it and leaves its lock
// and a pending create behind; a new agent's next Up clears both, reports
// what it did in the Result, and succeeds. The same agent then stops
// gracefully on SIGTERM in the middle of an Up, leaving no lock.
func TestAgentKilledMidUpRecovers(t *testing.T) {
	dir, backend := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "Pulumi.yaml"), sleepProgram)
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeFile(t, tokenFile, testToken+"\n")
	t.Cleanup(func() { killStrays(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	first := startAgent(t, dir, backend, tokenFile)
	client := dial(t, first.addr, testToken)
	upCancel := upUntilCreating(ctx, t, client, backend, 120)
	defer upCancel()
	locks := lockFiles(t, backend, "sleepy")
	if len(locks) != 1 {
		t.Fatalf("lock files during the update = %v; want one", locks)
	}
	var lock struct {
		Pid int `json:"pid"`
	}
	if b, err := os.ReadFile(locks[0]); err != nil || json.Unmarshal(b, &lock) != nil || lock.Pid == 0 {
		t.Fatalf("read lock %s: %v", locks[0], err)
	}
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.exited
	upCancel()
	if !waitFor(time.Minute, func() bool { return !running(lock.Pid) }) {
		t.Fatalf("the CLI (pid %d) outlived the killed agent", lock.Pid)
	}
	killStrays(dir) // plugins the killed CLI orphaned
	if got := lockFiles(t, backend, "sleepy"); len(got) != 1 {
		t.Fatalf("lock files after the kill = %v; want the stale one", got)
	}

	second := startAgent(t, dir, backend, tokenFile)
	client = dial(t, second.addr, testToken)
	r := retryUp(ctx, t, client).mustSucceed(t, "Up after the kill")
	rec := r.result.GetRecovery()
	host, _ := os.Hostname()
	if cl := rec.GetClearedLocks(); len(cl) != 1 || int(cl[0].GetPid()) != lock.Pid || cl[0].GetHostname() != host ||
		!strings.Contains(cl[0].GetWhy(), "not running") {
		t.Errorf("cleared locks = %v; want the lock of pid %d on %s, not running", cl, lock.Pid, host)
	}
	wantPending := []string{sleepURN + " creating"}
	if got := pendingStrings(rec.GetClearedPendingOperations()); !equalStrings(got, wantPending) {
		t.Errorf("cleared pending operations = %v; want %v", got, wantPending)
	}
	if got := pendingStrings(r.result.GetPendingOperations()); !equalStrings(got, wantPending) {
		t.Errorf("reported pending operations = %v; want %v", got, wantPending)
	}
	if rec.GetMethod() != "refresh --clear-pending-creates" {
		t.Errorf("recovery method = %q", rec.GetMethod())
	}
	// The repairs were announced before the operation ran, so that a
	// caller whose stream broke would still know of them; the pending
	// create before its clearing began, so that one whose stream broke
	// during the clearing would too.
	if n := len(r.recoveries); n == 0 || r.eventsBeforeRecovery != 0 || !proto.Equal(r.recoveries[n-1], rec) {
		t.Errorf("recoveries announced = %v (after %d events); want the Result's %v, before any event", r.recoveries, r.eventsBeforeRecovery, rec)
	}
	if len(rec.GetClearingPendingOperations()) != 0 {
		t.Errorf("the Result's recovery still lists operations being cleared: %v", rec.GetClearingPendingOperations())
	}
	announcedClearing := false
	for _, a := range r.recoveries {
		if len(a.GetClearedPendingOperations()) > 0 {
			break
		}
		announcedClearing = announcedClearing || equalStrings(pendingStrings(a.GetClearingPendingOperations()), wantPending)
	}
	if !announcedClearing {
		t.Errorf("recoveries announced = %v; want the pending create announced as being cleared before it was cleared", r.recoveries)
	}
	if r.result.GetChanges()["create"] != 1 {
		t.Errorf("changes after recovery = %v; want the Sleep resource created", r.result.GetChanges())
	}
	if got := lockFiles(t, backend, "sleepy"); len(got) != 0 {
		t.Errorf("lock files after recovery = %v", got)
	}
	again := collect(client.Up(ctx, &agentpb.UpRequest{})).mustSucceed(t, "Up after recovery")
	if again.result.GetRecovery() != nil || len(again.recoveries) != 0 || len(again.result.GetPendingOperations()) != 0 {
		t.Errorf("a clean stack reported recovery %v, pending %v", again.result.GetRecovery(), again.result.GetPendingOperations())
	}

	// SIGTERM in the middle of an update: the caller gets a Cancelled
	// result, the agent exits cleanly and the stack is left unlocked.
	if _, err := client.SetAllConfig(ctx, &agentpb.SetAllConfigRequest{Config: []*agentpb.ConfigItem{sleepFor(t, 120)}}); err != nil {
		t.Fatalf("SetAllConfig: %v", err)
	}
	stream := startUp(ctx, t, client)
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var res *agentpb.Result
	var streamErr error
	for {
		msg, err := stream.Recv()
		if err != nil {
			streamErr = err
			break
		}
		if msg.GetResult() != nil {
			res = msg.GetResult()
		}
	}
	if agenterr.ReasonOf(streamErr) != agenterr.Cancelled || res.GetError().GetReason() != string(agenterr.Cancelled) {
		t.Errorf("Up during SIGTERM ended with %v and result %v; want Cancelled", streamErr, res)
	}
	select {
	case <-second.exited:
		if second.err != nil {
			t.Errorf("agent exit after SIGTERM: %v", second.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the agent did not exit after SIGTERM")
	}
	if got := lockFiles(t, backend, "sleepy"); len(got) != 0 {
		t.Errorf("lock files after a graceful stop = %v", got)
	}
}

// upUntilCreating selects (creating) stack dev, has its Sleep take seconds
// and starts an Up, and returns once the state records the create in
// flight; the returned function ends the caller's side of the stream.
func upUntilCreating(ctx context.Context, t *testing.T, client agentpb.AutomationServiceClient, backend string, seconds int) context.CancelFunc {
	t.Helper()
	if _, err := client.SelectStack(ctx, &agentpb.SelectStackRequest{StackName: "dev", Create: true}); err != nil {
		t.Fatalf("SelectStack: %v", err)
	}
	if _, err := client.SetAllConfig(ctx, &agentpb.SetAllConfigRequest{Config: []*agentpb.ConfigItem{sleepFor(t, seconds)}}); err != nil {
		t.Fatalf("SetAllConfig: %v", err)
	}
	upCtx, upCancel := context.WithCancel(ctx)
	startUp(upCtx, t, client)
	if !waitFor(30*time.Second, func() bool {
		return slices.Contains(testenv.PendingOperations(backend, "sleepy", "dev"), sleepURN+" creating")
	}) {
		upCancel()
		t.Fatal("the state never recorded the pending create")
	}
	return upCancel
}

// retryUp selects stack dev on a new agent, shortens the Sleep to a second
// and runs an Up.
func retryUp(ctx context.Context, t *testing.T, client agentpb.AutomationServiceClient) opRun {
	t.Helper()
	if _, err := client.SelectStack(ctx, &agentpb.SelectStackRequest{StackName: "dev"}); err != nil {
		t.Fatalf("SelectStack on the new agent: %v", err)
	}
	if _, err := client.SetAllConfig(ctx, &agentpb.SetAllConfigRequest{Config: []*agentpb.ConfigItem{sleepFor(t, 1)}}); err != nil {
		t.Fatalf("SetAllConfig on the new agent: %v", err)
	}
	return collect(client.Up(ctx, &agentpb.UpRequest{}))
}

func pendingStrings(ops []*agentpb.PendingOperation) []string {
	out := make([]string, len(ops))
	for i, op := range ops {
		out[i] = op.GetUrn() + " " + op.GetType()
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestLiveLockIsKept checks that the agent never clears a lock whose holder
// may be alive: a live pid on this host, or any pid on another host. The
// operation fails with StackLocked and the lock stays.
func TestLiveLockIsKept(t *testing.T) {
	h := newHarness(t, configOnlyProgram)
	h.selectStack()
	h.up(&agentpb.UpRequest{}).mustSucceed(t, "Up")

	host, _ := os.Hostname()
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	lockDir := filepath.Join(h.backend, ".pulumi", "locks", "organization", "basics", "dev")
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	lockPath := filepath.Join(lockDir, "held-elsewhere.json")
	for _, tc := range []struct {
		name string
		pid  int
		host string
		why  string
	}{
		{"live process on this host", os.Getpid(), host, "is running"},
		{"process on another host", exited.Process.Pid, "another-" + host, "not this one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := json.Marshal(map[string]any{"pid": tc.pid, "username": "someone", "hostname": tc.host, "timestamp": time.Now()})
			writeFile(t, lockPath, string(b))
			r := h.up(&agentpb.UpRequest{}).mustFail(t, "Up on a held lock", agenterr.StackLocked)
			if !strings.Contains(r.err.Error(), tc.why) || agenterr.MetadataOf(r.err)["pid"] != strconv.Itoa(tc.pid) {
				t.Errorf("error = %v (metadata %v); want the holder's pid and %q", r.err, agenterr.MetadataOf(r.err), tc.why)
			}
			if _, err := os.Stat(lockPath); err != nil {
				t.Errorf("the held lock was removed: %v", err)
			}
		})
	}
}

// TestDamagedSidecarIsRemoved gives the stack's checkpoint the empty
// attributes sidecar that a CLI killed inside the blob library's write
// leaves behind, after which the CLI itself cannot read the stack. A new
// agent (as after the kill) removes it when it selects the stack; a warm
// agent removes it in its next update, which succeeds and says so in the
// Result's Recovery.
func TestDamagedSidecarIsRemoved(t *testing.T) {
	h := newHarness(t, "name: sidecar\nruntime: yaml\noutputs:\n  greeting: hello\n")
	h.selectStack()
	h.up(&agentpb.UpRequest{}).mustSucceed(t, "first up")

	sidecar := filepath.Join(".pulumi", "stacks", "sidecar", "dev.json.attrs")
	damage := func() {
		t.Helper()
		if _, err := os.Stat(filepath.Join(h.backend, sidecar)); err != nil {
			t.Fatalf("the backend has no sidecar where the blob library keeps it: %v", err)
		}
		if err := os.WriteFile(filepath.Join(h.backend, sidecar), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		export := exec.Command(filepath.Join(repoBin, "pulumi"), "stack", "export", "--stack", "dev", "--non-interactive")
		export.Dir = h.dir
		export.Env = append(os.Environ(), "PULUMI_BACKEND_URL=file://"+h.backend)
		if out, err := export.CombinedOutput(); err == nil || !strings.Contains(string(out), "EOF") {
			t.Fatalf("the CLI read a stack whose checkpoint sidecar is empty (err %v):\n%s", err, out)
		}
	}

	damage()
	h.start(2 * time.Second)
	h.selectStack()
	if _, err := os.Stat(filepath.Join(h.backend, sidecar)); !os.IsNotExist(err) {
		t.Fatalf("a new agent selected the stack and left the damaged sidecar (stat: %v)", err)
	}
	if !strings.Contains(h.logs.String(), "removed damaged attribute files") {
		t.Fatalf("the repair was not logged:\n%s", h.logs.String())
	}
	h.up(&agentpb.UpRequest{}).mustSucceed(t, "up after the select repaired the backend")

	damage()
	res := h.up(&agentpb.UpRequest{}).mustSucceed(t, "up over the damaged sidecar").result
	if got := res.GetRecovery().GetRepairedFiles(); !slices.Equal(got, []string{sidecar}) {
		t.Fatalf("Recovery.RepairedFiles = %q, want [%q]", got, sidecar)
	}
	if got := output(t, res, "greeting"); got != "hello" {
		t.Fatalf("output greeting = %v", got)
	}
	if res := h.up(&agentpb.UpRequest{}).mustSucceed(t, "up after the repair").result; res.GetRecovery() != nil {
		t.Fatalf("a healthy backend was repaired again: %v", res.GetRecovery())
	}
}
