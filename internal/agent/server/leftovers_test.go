package server_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/internal/proc"
	"github.com/stackyard/stackyard/test/provider"
	"github.com/stackyard/stackyard/test/testenv"
)

// stubborn makes the test provider behave like a real one in a long cloud
// call: it stays when its engine dies, and a Sleep runs to its end even
// when cancelled. Only the agent can end it then.
var stubborn = map[string]string{provider.StubbornEnv: "1"}

// providerExe is the test provider's executable.
const providerExe = "pulumi-resource-" + provider.Name

// failProgram's only resource fails to create; it is the project of
// sleepProgram, so that the two share a stack.
const failProgram = `name: sleepy
runtime: yaml
resources:
  f:
    type: stackyardtest:index:Fail
    properties:
      message: failed on purpose
      fail: true
`

// describe lists pids with their command lines, for failure messages.
func describe(pids []int) string {
	var b strings.Builder
	for _, pid := range pids {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		fmt.Fprintf(&b, "\n  %d: %s", pid, bytes.ReplaceAll(bytes.TrimRight(cmdline, "\x00"), []byte{0}, []byte{' '}))
	}
	return b.String()
}

// TestNoProcessOutlivesItsOperation runs operations that fail and succeed
// and checks that once the caller has the result no process of theirs
// runs: a failed `pulumi up` leaves its provider running, which the agent
// must end (a Stack that keeps failing would otherwise leak one process
// per retry).
func TestNoProcessOutlivesItsOperation(t *testing.T) {
	h := newHarnessEnv(t, failProgram, stubborn)
	h.selectStack()
	for i := 1; i <= 3; i++ {
		r := h.up(&agentpb.UpRequest{}).mustFail(t, "Up", agenterr.ResourceFailed)
		if !strings.Contains(r.err.Error(), "failed on purpose") {
			t.Fatalf("Up %d failed with %v; want the provider's Create failure", i, r.err)
		}
		if left := testenv.ProcessesIn(h.dir); len(left) > 0 {
			t.Fatalf("after failed Up %d these processes still run:%s", i, describe(left))
		}
	}

	writeFile(t, filepath.Join(h.dir, "Pulumi.yaml"), sleepProgram)
	h.setConfig(sleepFor(t, 1))
	h.up(&agentpb.UpRequest{}).mustSucceed(t, "Up")
	if left := testenv.ProcessesIn(h.dir); len(left) > 0 {
		t.Fatalf("after a successful Up these processes still run:%s", describe(left))
	}
	collect(h.client.Preview(h.ctx(), &agentpb.PreviewRequest{})).mustSucceed(t, "Preview")
	if left := testenv.ProcessesIn(h.dir); len(left) > 0 {
		t.Fatalf("after a Preview these processes still run:%s", describe(left))
	}
}

// TestKilledAgentsProvidersEndBeforeRetry kills the agent with SIGKILL, as
// happens when the operator is killed, while a provider is inside Create.
// The CLI dies with the agent, but the provider does not, and it would go
// on changing resources while the Update is retried. The next agent over
// the same registry must end it before it serves, and the retry must then
// recover the stack and succeed with nothing left running.
func TestKilledAgentsProvidersEndBeforeRetry(t *testing.T) {
	dir, backend := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "Pulumi.yaml"), sleepProgram)
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeFile(t, tokenFile, testToken+"\n")
	env := []string{proc.RegistryEnv + "=" + filepath.Join(t.TempDir(), "processes"), provider.StubbornEnv + "=1"}
	t.Cleanup(func() { killStrays(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	first := startAgent(t, dir, backend, tokenFile, env...)
	upCancel := upUntilCreating(ctx, t, dial(t, first.addr, testToken), backend, 600)
	defer upCancel()

	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.exited
	upCancel()
	// The CLI dies with the agent (parent-death signal); the provider it
	// started stays, still inside Create.
	if !waitFor(2*time.Minute, func() bool { return len(testenv.ProcessesOf(dir, "pulumi")) == 0 }) {
		t.Fatalf("the CLI outlived the killed agent:%s", describe(testenv.ProcessesOf(dir, "pulumi")))
	}
	providers := testenv.ProcessesOf(dir, providerExe)
	if len(providers) == 0 {
		t.Fatalf("no provider outlived the killed agent, nothing to test; processes in the workspace:%s",
			describe(testenv.ProcessesIn(dir)))
	}
	t.Logf("left running by the killed agent:%s", describe(testenv.ProcessesIn(dir)))

	second := startAgent(t, dir, backend, tokenFile, env...)
	// The new agent serves only once its predecessor's processes are gone.
	if left := testenv.ProcessesIn(dir); len(left) > 0 {
		t.Fatalf("the new agent serves while its predecessor's processes run:%s", describe(left))
	}
	for _, pid := range providers {
		if running(pid) {
			t.Errorf("provider %d still runs", pid)
		}
	}
	// Its log is copied from a pipe: it may arrive a moment after it serves.
	if !waitFor(time.Minute, func() bool {
		return strings.Contains(second.stderr.String(), "ended processes a previous agent left running")
	}) {
		t.Errorf("the new agent did not log what it ended; stderr:\n%s", second.stderr.String())
	}

	r := retryUp(ctx, t, dial(t, second.addr, testToken)).mustSucceed(t, "the retried Up")
	if got := pendingStrings(r.result.GetRecovery().GetClearedPendingOperations()); !equalStrings(got, []string{sleepURN + " creating"}) {
		t.Errorf("cleared pending operations = %v; want the interrupted create", got)
	}
	if left := testenv.ProcessesIn(dir); len(left) > 0 {
		t.Fatalf("after the retried Up these processes still run:%s", describe(left))
	}
	if entries, _ := os.ReadDir(strings.TrimPrefix(env[0], proc.RegistryEnv+"=")); len(entries) != 0 {
		t.Errorf("the registry still records %d trees after every run ended", len(entries))
	}
}
