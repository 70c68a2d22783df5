package faults

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/runtime/local"
	"github.com/stackyard/stackyard/test/testenv"
)

// agentPause is how long, in seconds, every update of the agent scenario
// sleeps before it writes (alternately this and one more, so that the
// Sleep changes, and so runs, every time).
const agentPause = 3

// testAgentKilled kills the agent (SIGKILL, as the OOM killer or a node
// failure would) at a random point of an update, AgentKills times, on
// one Stack. Each time the Update must end (failed as Interrupted, or
// succeeded if the kill came after its end), the Stack must converge
// with the new value written, and the stack must be left unlocked with
// no pending operation and no process of the dead run in the project
// directory.
func (s *suite) testAgentKilled(t *testing.T) {
	rnd := seeded(t)
	ns, journal := s.newNamespace(t, "agentkill-")
	name := ns + "-0"
	repo := s.newRepo(ns, program(s.outDir, ""))
	if err := s.client.Create(context.Background(), s.stackOf(ns, name, repo, "v0", journal)); err != nil {
		fatal(t, err)
	}
	s.waitConverged(t, ns, 3*time.Minute, name)
	wsDir := s.workspaceDir(ns, name)

	interrupted := 0
	for i := 1; i <= s.params.AgentKills; i++ {
		value := fmt.Sprintf("v%d", i)
		s.setConfig(t, ns, name, map[string]any{"message": value, "pause": agentPause + i%2})
		var running []string
		waitFor(t, 2*time.Minute, "an update running", func() string {
			if running = s.runningUpdates(t, ns); len(running) == 0 {
				return "no Update in progress"
			}
			return ""
		})
		delay := time.Duration(rnd.Float64() * float64((agentPause+1)*time.Second))
		time.Sleep(delay)
		agents := testenv.ProcessesOf(wsDir, local.LeanAgent)
		if len(agents) != 1 {
			fatalf(t, "kill %d: want one agent running in %s, found %v", i, wsDir, agents)
		}
		if err := syscall.Kill(agents[0], syscall.SIGKILL); err != nil {
			fatal(t, err)
		}

		var upd autov1alpha1.Update
		waitFor(t, 2*time.Minute, "the Update of the killed agent to end", func() string {
			if err := s.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: running[0]}, &upd); err != nil {
				return err.Error()
			}
			if !upd.Status.IsComplete() {
				return fmt.Sprintf("Update %s not complete: %s", upd.Name, upd.Status.Message)
			}
			return ""
		})
		outcome := "succeeded"
		if upd.Status.IsFailed() {
			outcome = failureReason(&upd)
			if outcome != autov1alpha1.UpdateReasonInterrupted {
				errorf(t, "kill %d: Update %s failed with reason %q, want %q: %s", i, upd.Name, outcome, autov1alpha1.UpdateReasonInterrupted, upd.Status.Message)
			}
			interrupted++
		}
		t.Logf("kill %d: agent %d killed %s into the run of %s, which ended %s", i, agents[0], fmtDuration(delay), upd.Name, outcome)

		s.waitConverged(t, ns, 3*time.Minute, name)
		if got := readFile(t, filepath.Join(s.outDir, name+".txt")); got != value {
			errorf(t, "kill %d: the file holds %q, want %q", i, got, value)
		}
		// The dead run's CLI, language host and provider are gone.
		waitFor(t, 30*time.Second, "no process of the killed run left", func() string {
			if left := testenv.ProcessesIn(filepath.Join(wsDir, "source")); len(left) > 0 {
				return fmt.Sprintf("processes %v still run in the project directory", left)
			}
			return ""
		})
	}
	if left := s.inProgress(t, ns); len(left) > 0 {
		errorf(t, "Updates still in progress: %v", left)
	}
	report := s.checkWrites(t, ns, []string{name}, readJournal(t, journal))
	t.Logf("RESULT agent-killed: kills=%d interrupted=%d %s", s.params.AgentKills, interrupted, report)
}
