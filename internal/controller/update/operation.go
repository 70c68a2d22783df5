package update

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
)

// operate runs obj's operation through the agent of ws and returns how it
// ended. It runs in a run's goroutine, never in a reconcile worker, and
// writes nothing to the API server: the reconcile that picks up the outcome
// does. ctx is cancelled (with a cause) when the Update is deleted or the
// operator stops; the agent then interrupts the Pulumi CLI.
func (r *Reconciler) operate(ctx context.Context, log logr.Logger, obj *autov1alpha1.Update, ws *autov1alpha1.Workspace) *outcome {
	o := &outcome{start: obj.Status.StartTime}
	if o.start.IsZero() {
		o.start = metav1.NewTime(r.now())
	}
	defer func() { o.end = metav1.NewTime(r.now()) }()

	plan, failure, err := r.readPlan(ctx, obj)
	switch {
	case failure != "":
		o.reason, o.message = autov1alpha1.UpdateReasonFailed, failure
		return o
	case err != nil:
		o.reason = ReasonInterrupted
		o.message = fmt.Sprintf("%v; the operation did not start and will be retried", err)
		return o
	}
	conn, err := r.Runtime.Dial(ctx, ws)
	if err != nil && contextCause(ctx) == nil {
		// No agent to talk to (after an operator restart the Workspace's
		// status can still name the previous process's agent): the
		// operation never started, which is an interruption to retry, not
		// a failure of the program.
		o.reason = ReasonInterrupted
		o.message = fmt.Sprintf("could not connect to the agent of workspace %s (%v); the operation did not start and will be retried", ws.Name, err)
		return o
	}
	if err != nil {
		o.failure(fmt.Errorf("connecting to the agent of workspace %s: %w", ws.Name, err), nil, contextCause(ctx))
		return o
	}
	defer func() { _ = conn.Close() }()
	agent := agentpb.NewAutomationServiceClient(conn)

	// The first call waits for the connection, for at most ConnectTimeout;
	// later calls fail fast if the agent goes away.
	connectCtx, cancel := context.WithTimeout(ctx, r.Options.ConnectTimeout)
	info, err := agent.Info(connectCtx, &agentpb.InfoRequest{SkipStack: true}, grpc.WaitForReady(true))
	timedOut := connectCtx.Err() != nil && ctx.Err() == nil
	cancel()
	if err != nil && timedOut {
		o.reason = ReasonInterrupted
		o.message = fmt.Sprintf("the agent of workspace %s did not answer within %s; the operation did not start and will be retried",
			ws.Name, r.Options.ConnectTimeout)
		return o
	}
	if err != nil {
		o.failure(err, nil, contextCause(ctx))
		return o
	}
	if info.GetProject() != "" {
		o.projectInfo = &autov1alpha1.ProjectInfo{Name: info.GetProject(), Runtime: info.GetRuntime()}
	}
	// The agent runs one call at a time; the Workspace controller may be
	// setting the stack up right now. That is waited out, not failed.
	log.V(1).Info("operation starting")
	var stream grpc.ServerStreamingClient[agentpb.OperationStream]
	var first *agentpb.OperationStream
	var firstErr error
	err = waitWhileBusy(ctx, func() error {
		if _, err := agent.SelectStack(ctx, selectStack(ws, obj.Spec.StackName)); err != nil {
			return err
		}
		s, err := startOperation(ctx, agent, &obj.Spec, plan)
		if err != nil {
			return err
		}
		msg, err := s.Recv()
		if agenterr.ReasonOf(err) == agenterr.AgentBusy {
			return err
		}
		stream, first, firstErr = s, msg, err
		return nil
	})
	if err != nil {
		o.failure(err, nil, contextCause(ctx))
		return o
	}
	var changes *changeCollector
	if obj.Spec.Type == autov1alpha1.PreviewType {
		changes = &changeCollector{values: savesPlan(obj)}
	}
	tail := &logTail{}
	res, err := consume(log, stream, first, firstErr, o, changes, tail)
	secrets := secretOutputs(res.GetOutputs())
	o.logTail = tail.Lines(secrets)
	switch {
	case err != nil:
		o.failure(err, res, contextCause(ctx))
	case res == nil:
		o.failure(errors.New("the agent ended the operation without a result"), nil, contextCause(ctx))
	case res.GetError() != nil:
		o.failure(errors.New(res.GetError().GetMessage()), res, contextCause(ctx))
	default:
		o.message = res.GetSummary().GetMessage()
		if o.message == "" {
			o.message = fmt.Sprintf("%s succeeded: %s", obj.Spec.Type, describeChanges(res.GetChanges()))
		}
		o.outputs = res.GetOutputs()
		if savesPlan(obj) {
			o.plan = res.GetPlan()
			diff, derr := changes.encodedDiff(secrets)
			if derr != nil {
				log.Info("the value diff was not recorded", "error", derr.Error())
			}
			o.diff = diff
		}
		if changes != nil {
			o.resourceChanges = changes.resources
			if changes.truncated {
				log.V(1).Info("the preview changes more resources than status.resourceChanges lists", "listed", len(changes.resources))
			}
		}
	}
	o.message = secrets.Redact(o.message)
	if rec := res.GetRecovery(); rec != nil {
		o.recovery = describeRecovery(rec)
	}
	o.permalink = res.GetPermalink()
	o.changes = res.GetChanges()
	log.V(1).Info("operation ended", "events", o.events,
		"reason", o.reason, "agentReason", string(o.agentReason), "changes", describeChanges(o.changes))
	return o
}

// startOperation sends the request for spec's operation type, an up held
// to plan when it is not empty. Secret outputs are asked for in clear
// text: they go into the outputs Secret, and nowhere else.
func startOperation(ctx context.Context, agent agentpb.AutomationServiceClient, spec *autov1alpha1.UpdateSpec, plan []byte) (grpc.ServerStreamingClient[agentpb.OperationStream], error) {
	parallel := ptr.Deref(spec.Parallel, 0)
	message := ptr.Deref(spec.Message, "")
	switch spec.Type {
	case autov1alpha1.PreviewType:
		return agent.Preview(ctx, &agentpb.PreviewRequest{
			Parallel: parallel, Message: message, ExpectNoChanges: ptr.Deref(spec.ExpectNoChanges, false),
			Replace: spec.Replace, Target: spec.Target, TargetDependents: ptr.Deref(spec.TargetDependents, false),
			Refresh: ptr.Deref(spec.Refresh, false), SavePlan: ptr.Deref(spec.SavePlan, false),
		})
	case autov1alpha1.UpType:
		return agent.Up(ctx, &agentpb.UpRequest{
			Parallel: parallel, Message: message, ExpectNoChanges: ptr.Deref(spec.ExpectNoChanges, false),
			Replace: spec.Replace, Target: spec.Target, TargetDependents: ptr.Deref(spec.TargetDependents, false),
			Refresh: ptr.Deref(spec.Refresh, false), ContinueOnError: ptr.Deref(spec.ContinueOnError, false), ShowSecrets: true,
			ExpectNoRefreshChanges: ptr.Deref(spec.ExpectNoRefreshChanges, false), Plan: plan,
		})
	case autov1alpha1.RefreshType:
		return agent.Refresh(ctx, &agentpb.RefreshRequest{
			Parallel: parallel, Message: message, ExpectNoChanges: ptr.Deref(spec.ExpectNoChanges, false),
			Target: spec.Target, TargetDependents: ptr.Deref(spec.TargetDependents, false), ShowSecrets: true,
		})
	case autov1alpha1.DestroyType:
		return agent.Destroy(ctx, &agentpb.DestroyRequest{
			Parallel: parallel, Message: message, Target: spec.Target,
			TargetDependents: ptr.Deref(spec.TargetDependents, false), Refresh: ptr.Deref(spec.Refresh, false),
			ContinueOnError: ptr.Deref(spec.ContinueOnError, false), Remove: ptr.Deref(spec.Remove, false), ShowSecrets: true,
		})
	default:
		return nil, fmt.Errorf("unsupported update type %q", spec.Type)
	}
}

// consume reads an operation's stream to its end: it counts the events,
// logs at debug level what each is about (its type, and for a resource step
// the URN and operation, never property values or messages), feeds changes
// when set and tail, and returns the Result and the stream's final error.
func consume(log logr.Logger, stream grpc.ServerStreamingClient[agentpb.OperationStream], first *agentpb.OperationStream, firstErr error,
	o *outcome, changes *changeCollector, tail *logTail) (*agentpb.Result, error) {
	var res *agentpb.Result
	last := time.Now()
	msg, err := first, firstErr
	for ; ; msg, err = stream.Recv() {
		if errors.Is(err, io.EOF) {
			return res, nil
		}
		if err != nil {
			return res, err
		}
		if ev := msg.GetEvent(); ev != nil {
			o.events++
			if changes != nil {
				changes.observe(ev)
			}
			tail.observe(ev)
			if debug := log.V(1); debug.Enabled() {
				urn, _, op, _ := stepOf(ev)
				debug.Info("engine event", "type", ev.GetType(), "sequence", ev.GetSequence(), "urn", urn, "op", op,
					"sinceLast", time.Since(last).Round(time.Millisecond).String())
			}
			last = time.Now()
		}
		if r := msg.GetRecovery(); r != nil {
			// Kept in case the stream breaks before the Result, which
			// repeats it.
			o.recovery = describeRecovery(r)
		}
		if r := msg.GetResult(); r != nil {
			res = r
		}
	}
}

// maxBusyWait bounds how long an operation waits for a busy agent (one
// running the Workspace controller's setup, `pulumi install` included).
const maxBusyWait = 10 * time.Minute

// waitWhileBusy runs call until it fails with something other than
// AgentBusy, pausing between attempts (200 ms doubling to 5 s), for at most
// maxBusyWait or until ctx ends.
func waitWhileBusy(ctx context.Context, call func() error) error {
	delay := 200 * time.Millisecond
	deadline := time.Now().Add(maxBusyWait)
	for {
		err := call()
		if agenterr.ReasonOf(err) != agenterr.AgentBusy || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// selectStack is how an operation selects its stack: as the Workspace
// declares it (create, secrets provider), so that an Update never creates a
// stack the Workspace was told not to (useLocalStackOnly). A stack the
// Workspace does not list is selected without creating it. The summary is
// not asked for: on an agent that has the stack selected already, with the
// same request, the call then runs no CLI command.
func selectStack(ws *autov1alpha1.Workspace, name string) *agentpb.SelectStackRequest {
	req := &agentpb.SelectStackRequest{StackName: name, SkipSummary: true}
	for _, st := range ws.Spec.Stacks {
		if st.Name == name {
			req.Create = ptr.Deref(st.Create, false)
			req.SecretsProvider = st.SecretsProvider
		}
	}
	return req
}
