//go:build bench

package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestWatchCLIForks: a process that forks without exec'ing, as every Go
// program starting a command does for a moment, is not counted as a
// second command. A shell stands in for the Pulumi CLI: started as
// `pulumi up`, it runs the script "up", whose subshell is a fork that never
// execs, so it reads as `pulumi up` too, for as long as its sleep runs.
func TestWatchCLIForks(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(sh, filepath.Join(dir, "pulumi")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "up"), []byte("(sleep 30; :); :\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "pulumi"), "up")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range slices.Backward(tree(cmd.Process.Pid)) {
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
		}
		_ = cmd.Wait()
	})
	// The shell, its subshell and the subshell's sleep.
	deadline := time.Now().Add(10 * time.Second)
	for len(tree(cmd.Process.Pid)) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the script's processes did not start: %v", tree(cmd.Process.Pid))
		}
		time.Sleep(10 * time.Millisecond)
	}
	pids := tree(cmd.Process.Pid)
	if _, ok := commandLine(pids[0]); !ok {
		t.Fatalf("the shell %d reads as not exec'd", pids[0])
	}
	if args, ok := commandLine(pids[1]); ok {
		t.Fatalf("the subshell %d reads as exec'd, with %q", pids[1], args)
	}

	w := watchCLI(os.Getpid())
	time.Sleep(300 * time.Millisecond)
	commands, agentPids := w.Stop()
	if !slices.Equal(commands, []string{"up"}) || len(agentPids) != 0 {
		t.Fatalf("watchCLI saw %q and agents %v, want one up and no agent", commands, agentPids)
	}
}
