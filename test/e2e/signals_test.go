package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestDevStopsOnEverySignal ends `stackyard dev` the three ways a terminal
// session does (Ctrl-C, kill, closing the terminal) and requires that
// nothing it started, etcd, kube-apiserver or a workspace agent, is still
// running afterwards.
func TestDevStopsOnEverySignal(t *testing.T) {
	_, bin := prepare(t)
	stateDir := filepath.Join(t.TempDir(), "state")
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			g := NewWithT(t)
			run := startDev(t, bin, stateDir)
			g.Expect(processesUnder(stateDir)).To(ContainElement(ContainSubstring("kube-apiserver")),
				"the control plane must be running before the signal")
			g.Expect(run.cmd.Process.Signal(sig)).To(Succeed())
			done := make(chan error, 1)
			go func() { done <- run.cmd.Wait() }()
			select {
			case err := <-done:
				g.Expect(err).NotTo(HaveOccurred(), "stackyard dev must exit cleanly on %s:\n%s", sig, run.output)
			case <-time.After(2 * time.Minute):
				_ = run.cmd.Process.Kill()
				t.Fatalf("stackyard dev did not stop on %s:\n%s", sig, run.output)
			}
			g.Expect(processesUnder(stateDir)).To(BeEmpty(), "left running after %s", sig)
		})
	}
}

// TestDevUntilReady is the bounded form of the main job that CI runs:
// `stackyard dev --until-ready` exits 0 once the sample is deployed, and
// non-zero naming what was missing when time runs out; either way it
// leaves nothing running.
func TestDevUntilReady(t *testing.T) {
	g := NewWithT(t)
	_, bin := prepare(t)
	stateDir := filepath.Join(t.TempDir(), "state")

	out, err := devUntilReady(bin, stateDir, "1ms")
	g.Expect(err).To(HaveOccurred(), "the sample cannot be deployed in a millisecond:\n%s", out)
	g.Expect(out).To(ContainSubstring("the sample was not ready within 1ms: Stack sample is not Ready"))
	g.Expect(processesUnder(stateDir)).To(BeEmpty())

	out, err = devUntilReady(bin, stateDir, "5m")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("The sample Stack is Ready and the sample pipeline's first promotion succeeded."))
	g.Expect(processesUnder(stateDir)).To(BeEmpty())
}

// devUntilReady runs `stackyard dev --until-ready=limit` to its end.
func devUntilReady(bin, stateDir, limit string) (string, error) {
	cmd := devCommand(bin, stateDir, "--until-ready="+limit)
	data, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(data)), err
}
