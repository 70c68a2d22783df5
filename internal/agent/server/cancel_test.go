package server_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/test/testenv"
)

// sleepProgram creates a Sleep resource that takes as long as config
// "sleep" says.
const sleepProgram = `name: sleepy
runtime: yaml
config:
  sleep:
    type: integer
resources:
  nap:
    type: stackyardtest:index:Sleep
    properties:
      seconds: ${sleep}
outputs:
  slept: ${nap.seconds}
`

const sleepURN = "urn:pulumi:dev::sleepy::stackyardtest:index:Sleep::nap"

func sleepFor(t *testing.T, seconds int) *agentpb.ConfigItem {
	return structured(t, "sleep", seconds, false)
}

// startUp starts an Up and returns its stream once the engine has begun
// creating the Sleep resource.
func startUp(ctx context.Context, t *testing.T, client agentpb.AutomationServiceClient) grpc.ServerStreamingClient[agentpb.OperationStream] {
	t.Helper()
	stream, err := client.Up(ctx, &agentpb.UpRequest{})
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	for {
		msg, err := stream.Recv()
		if err != nil {
			t.Fatalf("Up ended before the Sleep resource started: %v", err)
		}
		if isStepStart(msg.GetEvent(), sleepURN) {
			return stream
		}
	}
}

// isStepStart reports whether e is the resourcePreEvent of urn.
func isStepStart(e *agentpb.EngineEvent, urn string) bool {
	if e.GetType() != "resourcePreEvent" {
		return false
	}
	md := e.GetEvent().GetFields()["resourcePreEvent"].GetStructValue().GetFields()["metadata"].GetStructValue()
	return md.GetFields()["urn"].GetStringValue() == urn
}

// TestCancelByCaller cancels an Up in the middle of a long resource
// operation: the agent interrupts the CLI, every process it started ends,
// the agent refuses a second call while the first runs, and the next Up
// works. The agent is warm and knows the state clean before the cancelled
// Up; after it, the next Up checks the state for pending operations again.
func TestCancelByCaller(t *testing.T) {
	h := newHarness(t, sleepProgram)
	h.selectStack()
	h.setConfig(sleepFor(t, 1))
	h.up(&agentpb.UpRequest{}).mustSucceed(t, "first Up")
	h.setConfig(sleepFor(t, 900))

	ctx, cancel := context.WithCancel(h.ctx())
	stream := startUp(ctx, t, h.client)

	// One call at a time: a second mutating call is refused, not queued.
	_, err := h.client.SetAllConfig(h.ctx(), &agentpb.SetAllConfigRequest{Config: []*agentpb.ConfigItem{sleepFor(t, 1)}})
	if agenterr.ReasonOf(err) != agenterr.AgentBusy {
		t.Errorf("SetAllConfig during Up: %v (reason %s), want AgentBusy", err, agenterr.ReasonOf(err))
	}

	cancel()
	for {
		if _, err := stream.Recv(); err != nil {
			break
		}
	}
	// The Sleep lasts 15 minutes: processes gone within 5 can only mean
	// that the cancel ended the CLI and its plugins, however slow the
	// machine.
	if !waitFor(5*time.Minute, func() bool { return len(testenv.ProcessesIn(h.dir)) == 0 }) {
		t.Fatalf("processes still running in the workspace after cancel: %v", testenv.ProcessesIn(h.dir))
	}

	// Once the agent has finished the cancelled call it takes new ones.
	if !waitFor(15*time.Second, func() bool {
		_, err := h.client.SetAllConfig(h.ctx(), &agentpb.SetAllConfigRequest{Config: []*agentpb.ConfigItem{sleepFor(t, 1)}})
		return err == nil
	}) {
		t.Fatal("the agent stayed busy after the cancelled Up")
	}
	var r opRun
	cmds := h.commandsOf(func() { r = h.up(&agentpb.UpRequest{}).mustSucceed(t, "Up after cancel") })
	if got := output(t, r.result, "slept"); got != float64(1) {
		t.Errorf("output slept = %v; want 1", got)
	}
	if len(cmds) == 0 || cmds[0] != "stack export" {
		t.Errorf("the Up after a cancelled one ran %q; want the state exported first", cmds)
	}
}

// TestShutdownCancels shuts the server down during an Up, as SIGTERM does:
// the caller still receives a Result whose error says Cancelled, the stream
// ends with a Canceled status, and the stack is left unlocked.
func TestShutdownCancels(t *testing.T) {
	h := newHarness(t, sleepProgram)
	h.selectStack()
	h.setConfig(sleepFor(t, 900))

	stream := startUp(h.ctx(), t, h.client)
	shutdownDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		shutdownDone <- h.srv.Shutdown(ctx)
	}()
	var res *agentpb.Result
	var streamErr error
	for {
		msg, err := stream.Recv()
		if err != nil {
			streamErr = err
			break
		}
		if r := msg.GetResult(); r != nil {
			res = r
		}
	}
	if errors.Is(streamErr, io.EOF) || agenterr.ReasonOf(streamErr) != agenterr.Cancelled {
		t.Errorf("stream ended with %v (reason %s), want Cancelled", streamErr, agenterr.ReasonOf(streamErr))
	}
	if res.GetError().GetReason() != string(agenterr.Cancelled) {
		t.Errorf("result = %v; want error reason Cancelled", res)
	}
	if err := <-shutdownDone; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	// After shutdown the agent takes no new operation.
	collect(h.client.Preview(h.ctx(), &agentpb.PreviewRequest{})).mustFail(t, "Preview after Shutdown", agenterr.Cancelled)

	// A new agent over the same workspace finds the stack unlocked and clean.
	h.start(2 * time.Second)
	h.selectStack()
	h.setConfig(sleepFor(t, 1))
	r := h.up(&agentpb.UpRequest{}).mustSucceed(t, "Up after shutdown")
	if r.result.GetRecovery() != nil {
		t.Errorf("a graceful shutdown needed recovery: %v", r.result.GetRecovery())
	}
}
