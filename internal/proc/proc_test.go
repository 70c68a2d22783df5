//go:build linux

package proc

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary act as one of the helper processes below
// instead of running the tests.
const helperEnv = "PROC_TEST_HELPER"

// TestMain runs a helper when asked to, and the tests otherwise.
func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

// helper is a process of a test tree. "sleep" sleeps; the other modes start
// a sleeping child the way a plugin may be started, print its pid and exit,
// leaving the child an orphan: "group" in a process group of its own (as
// the Pulumi CLI starts plugins), "session" in a session of its own,
// "clean-env" in its own group with an empty environment.
func helper(mode string) int {
	if mode == "sleep" {
		time.Sleep(5 * time.Minute)
		return 0
	}
	self, err := os.Executable()
	if err != nil {
		return 2
	}
	child := exec.Command(self)
	child.Env = append(os.Environ(), helperEnv+"=sleep")
	switch mode {
	case "group":
		child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	case "session":
		child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	case "clean-env":
		child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		child.Env = []string{helperEnv + "=sleep"}
	default:
		return 2
	}
	if err := child.Start(); err != nil {
		return 2
	}
	fmt.Println(child.Process.Pid)
	return 0
}

// startTree starts a helper in mode as the leader of a new tree and
// returns the tree and the orphan the leader left once it has exited.
func startTree(t *testing.T, mode string) (Tree, int) {
	t.Helper()
	tree, err := NewTree()
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	leader := exec.Command(self)
	leader.Env = append(os.Environ(), helperEnv+"="+mode, tree.Env())
	leader.SysProcAttr = SessionAttr()
	out, err := leader.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	tree.Started(leader.Process.Pid)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the orphan's pid: %v", err)
	}
	if err := leader.Wait(); err != nil {
		t.Fatalf("leader: %v", err)
	}
	orphan, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(orphan, syscall.SIGKILL) })
	if !Alive(orphan) {
		t.Fatalf("the orphan %d is not running", orphan)
	}
	return tree, orphan
}

// TestEndFindsOrphans checks that End finds and ends a process its leader
// orphaned, whether it left the leader's group (found by the session and
// the mark), its session (found by the mark) or its environment (found by
// the session).
func TestEndFindsOrphans(t *testing.T) {
	for _, mode := range []string{"group", "session", "clean-env"} {
		t.Run(mode, func(t *testing.T) {
			tree, orphan := startTree(t, mode)
			if got := tree.Members(); !slices.Contains(got, orphan) {
				t.Fatalf("Members = %v; want the orphan %d", got, orphan)
			}
			ended, err := tree.End(2 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(ended, orphan) {
				t.Errorf("End ended %v; want the orphan %d among them", ended, orphan)
			}
			if Alive(orphan) {
				t.Errorf("the orphan %d runs after End", orphan)
			}
			if got := tree.Members(); len(got) != 0 {
				t.Errorf("Members after End = %v", got)
			}
		})
	}
}

// TestEndKillsWithoutGrace checks that a process ignoring SIGTERM is
// killed, and that End with no grace kills at once.
func TestEndKillsWithoutGrace(t *testing.T) {
	tree, err := NewTree()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done")
	cmd.Env = append(os.Environ(), tree.Env())
	cmd.SysProcAttr = SessionAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tree.Started(cmd.Process.Pid)
	// Only once the shell ignores SIGTERM does its end prove the SIGKILL.
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })

	if _, err := tree.End(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	err = <-waited
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the shell ended with %v; want killed by SIGKILL", err)
	}
}

// TestMembersLeaderReused checks that the session of a recorded leader
// counts only while the leader's pid belongs to the process recorded. The
// session is one the test starts: a shell that leads it, and the shell's
// child in it.
func TestMembersLeaderReused(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 300 & echo $!; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the shell printed %q, not its child's pid", line)
	}
	leader, ok := readStat(cmd.Process.Pid)
	if !ok || !leader.running() || leader.sid != cmd.Process.Pid {
		t.Fatalf("the shell %d does not lead a session of its own: %+v", cmd.Process.Pid, leader)
	}
	tree := Tree{ID: "0123456789abcdef", Leader: cmd.Process.Pid, LeaderStart: leader.start}
	if got := tree.Members(); !slices.Contains(got, child) {
		t.Errorf("Members = %v; want the child %d, in the leader's session", got, child)
	}
	tree.LeaderStart = leader.start - 1
	if got := tree.Members(); slices.Contains(got, child) {
		t.Errorf("Members with a reused leader pid = %v; want no process of that session", got)
	}
}

// TestAliveZombie checks that a process that exited but was not reaped is
// not alive, and that a live one is.
func TestAliveZombie(t *testing.T) {
	if !Alive(os.Getpid()) {
		t.Error("this process is not alive")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, ok := readStat(pid)
		if !ok {
			t.Fatalf("process %d vanished before it was reaped", pid)
		}
		if st.state == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d never became a zombie (state %c)", pid, st.state)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if Alive(pid) {
		t.Errorf("a zombie is alive")
	}
	_ = cmd.Wait()
	if Alive(pid) {
		t.Errorf("a reaped process is alive")
	}
	if Alive(0) || Alive(-1) {
		t.Error("pid 0 or -1 is alive")
	}
}

func TestStartTimeAndCmdline(t *testing.T) {
	started, ok := StartTime(os.Getpid())
	if !ok || started.After(time.Now()) || time.Since(started) > 24*time.Hour {
		t.Errorf("StartTime = %v, %v; want a time before now", started, ok)
	}
	if got := Cmdline(os.Getpid()); len(got) == 0 || got[0] != os.Args[0] {
		t.Errorf("Cmdline = %q; want %q first", got, os.Args[0])
	}
	if wd, _ := os.Getwd(); Cwd(os.Getpid()) != wd || wd == "" {
		t.Errorf("Cwd = %q; want %q", Cwd(os.Getpid()), wd)
	}
	if Cwd(-1) != "" {
		t.Errorf("Cwd(-1) = %q; want nothing", Cwd(-1))
	}
}

// TestRegistrySweep records a tree whose leader left an orphan and checks
// that Sweep ends it and forgets the tree, and that records survive only
// while their processes do.
func TestRegistrySweep(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "trees")
	reg := NewRegistry(dir)
	if ended, err := reg.Sweep(); err != nil || len(ended) != 0 {
		t.Fatalf("Sweep of an empty registry = %v, %v", ended, err)
	}
	tree, orphan := startTree(t, "group")
	if err := reg.Record(tree); err != nil {
		t.Fatal(err)
	}
	gone, err := NewTree()
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Record(gone); err != nil {
		t.Fatal(err)
	}
	// A write cut short leaves a temporary file, which Sweep clears.
	if err := os.WriteFile(filepath.Join(dir, tempPrefix+"x"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	trees, err := reg.Trees()
	if err != nil || len(trees) != 2 {
		t.Fatalf("Trees = %v, %v; want the two recorded", trees, err)
	}

	ended, err := reg.Sweep()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ended, orphan) {
		t.Errorf("Sweep ended %v; want the orphan %d among them", ended, orphan)
	}
	if Alive(orphan) {
		t.Errorf("the orphan %d runs after Sweep", orphan)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("registry after Sweep holds %v", entries)
	}

	// Forget removes a record; a nil Registry records nothing.
	if err := reg.Record(gone); err != nil {
		t.Fatal(err)
	}
	reg.Forget(gone)
	if trees, _ := reg.Trees(); len(trees) != 0 {
		t.Errorf("Trees after Forget = %v", trees)
	}
	var none *Registry
	if err := none.Record(gone); err != nil {
		t.Errorf("nil Registry Record: %v", err)
	}
	if ended, err := none.Sweep(); err != nil || ended != nil {
		t.Errorf("nil Registry Sweep = %v, %v", ended, err)
	}
	if err := reg.Record(Tree{ID: "../escape"}); err == nil {
		t.Error("Record accepted an ID with a path in it")
	}
}

// TestRegistryBadRecord checks that a record that cannot be read stops
// Sweep, which must not report a clean slate it cannot vouch for.
func TestRegistryBadRecord(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "abc"+recordSuffix), []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewRegistry(dir).Sweep(); err == nil || !strings.Contains(err.Error(), "not a tree record") {
		t.Errorf("Sweep = %v; want an error naming the bad record", err)
	}
}
