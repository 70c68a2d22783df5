package update

import (
	"context"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
)

// TestOperationHoldsNoWorker runs a long up with a single reconcile worker:
// an Update of another workspace starts and completes while the first is
// still sleeping.
func TestOperationHoldsNoWorker(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startManager(Options{MaxConcurrentReconciles: 1})
	f.workspace("slow", map[string]any{"sleep": 40})
	f.workspace("fast", nil)

	f.createUpdate("slow", "slow", autov1alpha1.UpType)
	f.waitRunning("slow", opTimeout)
	f.waitSleeping(opTimeout)
	f.createUpdate("fast", "fast", autov1alpha1.UpType)
	if u := f.waitComplete("fast", opTimeout); u.Status.IsFailed() {
		t.Fatalf("fast: %s: %s", failedReason(u), u.Status.Message)
	}
	if u := f.get("slow"); progressingReason(u) != autov1alpha1.UpdateReasonInProgress {
		t.Fatalf("the slow Update is no longer running: %s", statusJSON(u))
	}
}

// TestDeleteCancelsOperation deletes an Update in the middle of a 60 second
// resource operation: the operation is cancelled (the agent interrupts the
// CLI), the finalizer is removed once it has stopped, and the stack is
// usable again at once.
func TestDeleteCancelsOperation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startManager(Options{})
	a := f.workspace("ws", map[string]any{"sleep": 60})

	u := f.createUpdate("up", "ws", autov1alpha1.UpType)
	f.waitRunning("up", opTimeout)
	f.waitSleeping(opTimeout)
	if err := env.Client.Delete(context.Background(), u); err != nil {
		t.Fatalf("deleting the Update: %v", err)
	}
	// Far sooner than the 60 seconds the sleep would take.
	f.waitFor("up", 30*time.Second, "deleted", func(u *autov1alpha1.Update) bool { return u == nil })
	if !containsLine(f.events("up", 2), "Warning "+ReasonCancelled+": ") {
		t.Errorf("no Warning %s event", ReasonCancelled)
	}
	if !f.metrics.observed("up", ResultCancelled, 1) {
		t.Errorf("metrics: %+v", f.metrics.obs)
	}

	f.nextUpSucceeds(a, "ws")
}

// TestOperationTimeout: an operation that runs past OperationTimeout (a
// 60 second resource operation under a 15 second bound, the program itself
// setting no timeout) is cancelled, the Update fails saying why, and the
// stack takes the next up.
func TestOperationTimeout(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// Long enough for the next, quick up on a busy machine.
	f.startManager(Options{OperationTimeout: 15 * time.Second})
	a := f.workspace("ws", map[string]any{"sleep": 60})

	f.createUpdate("up", "ws", autov1alpha1.UpType)
	f.waitRunning("up", opTimeout)
	// Sooner than the 60 seconds the sleep would take.
	u := f.waitComplete("up", 50*time.Second)
	if !u.Status.IsFailed() || failedReason(u) != autov1alpha1.UpdateReasonFailed ||
		!strings.Contains(u.Status.Message, "operation timeout (15s)") {
		t.Fatalf("want a failure naming the operation timeout: %s", statusJSON(u))
	}
	if !f.metrics.observed("up", ResultFailed, 1) {
		t.Errorf("metrics: %+v", f.metrics.obs)
	}
	// A deadline sent to the agent races the operator's own: the agent
	// could end the operation first and it would read as a stopped agent.
	if n := a.deadlines.Load(); n != 0 {
		t.Errorf("%d operation streams reached the agent with a deadline", n)
	}

	f.nextUpSucceeds(a, "ws")
}

// nextUpSucceeds shows that a cancelled operation has really stopped: with
// the sleep taken out of agent a's config, the stack of Workspace ws takes
// another up.
func (f *fixture) nextUpSucceeds(a *testAgent, ws string) {
	f.t.Helper()
	f.setConfigWhenFree(a, map[string]any{"sleep": 0})
	f.createUpdate("again", ws, autov1alpha1.UpType)
	if u := f.waitComplete("again", opTimeout); u.Status.IsFailed() {
		f.t.Fatalf("the next up failed: %s: %s", failedReason(u), u.Status.Message)
	}
}

// TestRestartInterruptsOperation stops the operator in the middle of a long
// up and starts a new one: the Update, left Progressing by the stopped
// operator, is completed as Failed with reason Interrupted, as is an Update
// left Progressing by an operator that crashed (written here directly, in
// the v2 operator's shape). A new up of the stack then succeeds.
func TestRestartInterruptsOperation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	stop := f.startManager(Options{})
	a := f.workspace("ws", map[string]any{"sleep": 60})

	f.createUpdate("up", "ws", autov1alpha1.UpType)
	f.waitRunning("up", opTimeout)
	f.waitSleeping(opTimeout)
	stop()
	if u := f.get("up"); progressingReason(u) != autov1alpha1.UpdateReasonInProgress {
		t.Fatalf("the stopping operator changed the Update: %s", statusJSON(u))
	}

	crashed := f.createUpdate("crashed", "ws", autov1alpha1.UpType, func(u *autov1alpha1.Update) {
		u.Finalizers = []string{autov1alpha1.UpdateFinalizer}
	})
	crashed.Status.StartTime = metav1.NewTime(time.Now().Add(-time.Hour))
	for _, typ := range []string{autov1alpha1.UpdateConditionTypeProgressing, autov1alpha1.UpdateConditionTypeComplete, autov1alpha1.UpdateConditionTypeFailed} {
		status := metav1.ConditionFalse
		if typ == autov1alpha1.UpdateConditionTypeProgressing {
			status = metav1.ConditionTrue
		}
		apimeta.SetStatusCondition(&crashed.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: "Progressing"})
	}
	if err := env.Client.Status().Update(context.Background(), crashed); err != nil {
		t.Fatalf("writing the crashed Update's status: %v", err)
	}

	f.startManager(Options{})
	for _, name := range []string{"up", "crashed"} {
		u := f.waitComplete(name, 20*time.Second)
		if !u.Status.IsFailed() || failedReason(u) != ReasonInterrupted || u.Status.Message != interruptedMessage {
			t.Errorf("%s: failed=%v reason=%s message=%q, want Interrupted", name, u.Status.IsFailed(), failedReason(u), u.Status.Message)
		}
		if u.Status.EndTime.IsZero() {
			t.Errorf("%s: no endTime", name)
		}
		f.waitFor(name, 10*time.Second, "without finalizer", func(u *autov1alpha1.Update) bool { return u != nil && len(u.Finalizers) == 0 })
		if !containsLine(f.events(name, 1), "Warning "+ReasonInterrupted+": ") {
			t.Errorf("%s: no Warning %s event", name, ReasonInterrupted)
		}
	}

	if !f.metrics.observed("up", ResultInterrupted, 2) {
		t.Errorf("metrics: %+v", f.metrics.obs)
	}

	// The retry the Stack controller would make works.
	f.setConfigWhenFree(a, map[string]any{"sleep": 0})
	f.createUpdate("retry", "ws", autov1alpha1.UpType)
	if u := f.waitComplete("retry", opTimeout); u.Status.IsFailed() {
		t.Fatalf("the retry failed: %s: %s", failedReason(u), u.Status.Message)
	}
}

// TestUpdateWaitsForBusyAgent keeps the agent busy with an up of the
// test's own: an Update then waits (the agent runs one call at a time, and
// the Workspace controller's setup is such a call) instead of failing, and
// runs once the agent is free.
func TestUpdateWaitsForBusyAgent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startManager(Options{})
	a := f.workspace("ws", map[string]any{"sleep": 4})

	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	stream, err := a.client.Up(ctx, &agentpb.UpRequest{})
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	for {
		msg, err := stream.Recv()
		if err != nil {
			t.Fatalf("the test's up ended before its Sleep started: %v", err)
		}
		if urn, _, _, _ := stepOf(msg.GetEvent()); urn == sleepURN {
			break
		}
	}

	// The agent refuses the preview while the test's up runs. A second
	// refusal shows the controller tried again instead of failing the
	// Update on the first; and it still waits.
	f.createUpdate("preview", "ws", autov1alpha1.PreviewType)
	for deadline := time.Now().Add(opTimeout); a.busy.Load() < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent refused the preview %d times, want 2", a.busy.Load())
		}
	}
	if u := f.get("preview"); u == nil || u.Status.IsComplete() {
		t.Fatalf("the preview finished while the agent was busy: %+v", u)
	}
	for {
		if _, err := stream.Recv(); err != nil {
			break
		}
	}
	u := f.waitComplete("preview", opTimeout)
	if u.Status.IsFailed() {
		t.Fatalf("the preview failed instead of waiting: %s: %s", failedReason(u), u.Status.Message)
	}
}

// waitSleeping waits until the operator's debug log shows that the engine
// has started the Sleep resource, so that the operation is in the middle of
// a long resource step.
func (f *fixture) waitSleeping(timeout time.Duration) {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(f.logs.String(), `"urn"="`+sleepURN+`" "op"="create"`) {
		if time.Now().After(deadline) {
			f.t.Fatalf("the Sleep resource did not start within %s", timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// setConfigWhenFree sets config once the agent has finished the operation
// it was interrupting (until then it answers AgentBusy).
func (f *fixture) setConfigWhenFree(a *testAgent, config map[string]any) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := a.client.SetAllConfig(testContext(f.t), &agentpb.SetAllConfigRequest{})
		if err == nil {
			break
		}
		if agenterr.ReasonOf(err) != agenterr.AgentBusy || time.Now().After(deadline) {
			f.t.Fatalf("waiting for the agent to be free: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.setConfig(a, config)
}
