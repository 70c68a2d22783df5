package server

import (
	"context"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/internal/agent/readset"
)

// execAgent is what the CLI records as the agent that ran an update.
const execAgent = "stackyard-agent"

// operation is one engine operation as the shared runner sees it.
type operation struct {
	// kind is the summary's kind: "update", "preview", "refresh", "destroy".
	kind string
	// mutating operations clear pending operations before they run.
	mutating bool
	// showSecrets returns secret outputs in plain text.
	showSecrets bool
	// message is the operation's message, for a synthesized summary.
	message string
	// outputsFromEvents has the outputs the run reads taken from its
	// engine events when they show them (stateWorkspace.StackOutputs).
	outputsFromEvents bool
	// run runs the operation once, sending its events to ch.
	run func(ctx context.Context, st auto.Stack, ch chan<- events.EngineEvent) (outcome, error)
	// after runs once the operation succeeded (Destroy with remove forgets
	// the stack).
	after func()
}

// outcome is what one successful run produced.
type outcome struct {
	history   *auto.UpdateSummary
	changes   map[apitype.OpType]int
	outputs   auto.OutputMap
	permalink string
	// plan is the update plan a preview saved.
	plan []byte
}

// Preview computes the changes an update would make.
func (s *Server) Preview(req *agentpb.PreviewRequest, stream grpc.ServerStreamingServer[agentpb.OperationStream]) error {
	opts := []optpreview.Option{optpreview.UserAgent(execAgent)}
	if n := req.GetParallel(); n > 0 {
		opts = append(opts, optpreview.Parallel(int(n)))
	}
	if m := req.GetMessage(); m != "" {
		opts = append(opts, optpreview.Message(m))
	}
	if req.GetExpectNoChanges() {
		opts = append(opts, optpreview.ExpectNoChanges())
	}
	if r := req.GetReplace(); len(r) > 0 {
		opts = append(opts, optpreview.Replace(r))
	}
	if t := req.GetTarget(); len(t) > 0 {
		opts = append(opts, optpreview.Target(t))
	}
	if req.GetTargetDependents() {
		opts = append(opts, optpreview.TargetDependents())
	}
	if req.GetRefresh() {
		opts = append(opts, optpreview.Refresh())
	}
	savePlan := req.GetSavePlan()
	return s.operate(stream, operation{
		kind:    "preview",
		message: req.GetMessage(),
		run: func(ctx context.Context, st auto.Stack, ch chan<- events.EngineEvent) (outcome, error) {
			opts := append(opts, optpreview.EventStreams(ch))
			var plan *planFile
			if savePlan {
				var err error
				if plan, err = newPlanFile(nil); err != nil {
					return outcome{}, err
				}
				defer plan.remove()
				opts = append(opts, optpreview.Plan(plan.path))
			}
			res, err := st.Preview(ctx, opts...)
			if err != nil {
				return outcome{}, err
			}
			out := outcome{changes: res.ChangeSummary, permalink: permalinkOf(res.GetPermalink())}
			if plan != nil {
				if out.plan, err = plan.read(); err != nil {
					return outcome{}, err
				}
			}
			return out, nil
		},
	})
}

// Up updates the stack's resources to match the program.
func (s *Server) Up(req *agentpb.UpRequest, stream grpc.ServerStreamingServer[agentpb.OperationStream]) error {
	opts := []optup.Option{optup.UserAgent(execAgent), optup.ShowSecrets(false)}
	if n := req.GetParallel(); n > 0 {
		opts = append(opts, optup.Parallel(int(n)))
	}
	if m := req.GetMessage(); m != "" {
		opts = append(opts, optup.Message(m))
	}
	if req.GetExpectNoChanges() {
		opts = append(opts, optup.ExpectNoChanges())
	}
	if r := req.GetReplace(); len(r) > 0 {
		opts = append(opts, optup.Replace(r))
	}
	if t := req.GetTarget(); len(t) > 0 {
		opts = append(opts, optup.Target(t))
	}
	if req.GetTargetDependents() {
		opts = append(opts, optup.TargetDependents())
	}
	strictRefresh := req.GetExpectNoRefreshChanges()
	if req.GetRefresh() && !strictRefresh {
		opts = append(opts, optup.Refresh())
	}
	if req.GetContinueOnError() {
		opts = append(opts, optup.ContinueOnError())
	}
	planData := req.GetPlan()
	return s.operate(stream, operation{
		kind:              "update",
		mutating:          true,
		showSecrets:       req.GetShowSecrets(),
		message:           req.GetMessage(),
		outputsFromEvents: true,
		run: func(ctx context.Context, st auto.Stack, ch chan<- events.EngineEvent) (outcome, error) {
			if strictRefresh {
				// The refresh runs on its own, so that changes it finds
				// stop the update before anything is changed. The
				// Automation API closes an operation's event channels when
				// it ends, so the refresh gets its own, forwarded into ch.
				refreshEvents := make(chan events.EngineEvent)
				forwarded := make(chan struct{})
				go func() {
					defer close(forwarded)
					for e := range refreshEvents {
						ch <- e
					}
				}()
				_, err := st.Refresh(ctx, optrefresh.UserAgent(execAgent), optrefresh.ExpectNoChanges(), optrefresh.EventStreams(refreshEvents))
				<-forwarded
				if err != nil && strings.Contains(err.Error(), "no changes were expected") {
					return outcome{}, agenterr.New(agenterr.UnexpectedChanges,
						"the refresh before the update found changes made outside Pulumi and expectNoRefreshChanges is set, so nothing was updated")
				}
				if err != nil {
					return outcome{}, err
				}
			}
			opts := append(opts, optup.EventStreams(ch))
			if len(planData) > 0 {
				plan, err := newPlanFile(planData)
				if err != nil {
					return outcome{}, err
				}
				defer plan.remove()
				opts = append(opts, optup.Plan(plan.path))
			}
			res, err := st.Up(ctx, opts...)
			if err != nil {
				return outcome{}, err
			}
			return outcome{history: &res.Summary, outputs: res.Outputs, permalink: permalinkOf(res.GetPermalink())}, nil
		},
	})
}

// Refresh reconciles the stack's state with its resources; with
// preview_only it only reports the drift.
func (s *Server) Refresh(req *agentpb.RefreshRequest, stream grpc.ServerStreamingServer[agentpb.OperationStream]) error {
	opts := []optrefresh.Option{optrefresh.UserAgent(execAgent), optrefresh.ShowSecrets(false)}
	if n := req.GetParallel(); n > 0 {
		opts = append(opts, optrefresh.Parallel(int(n)))
	}
	if m := req.GetMessage(); m != "" {
		opts = append(opts, optrefresh.Message(m))
	}
	if req.GetExpectNoChanges() {
		opts = append(opts, optrefresh.ExpectNoChanges())
	}
	if t := req.GetTarget(); len(t) > 0 {
		opts = append(opts, optrefresh.Target(t))
	}
	if req.GetTargetDependents() {
		opts = append(opts, optrefresh.TargetDependents())
	}
	if req.GetClearPendingCreates() {
		opts = append(opts, optrefresh.ClearPendingCreates())
	}
	preview := req.GetPreviewOnly()
	return s.operate(stream, operation{
		kind:        "refresh",
		mutating:    !preview,
		showSecrets: req.GetShowSecrets(),
		message:     req.GetMessage(),
		run: func(ctx context.Context, st auto.Stack, ch chan<- events.EngineEvent) (outcome, error) {
			opts := append(opts, optrefresh.EventStreams(ch))
			if preview {
				res, err := st.PreviewRefresh(ctx, opts...)
				if err != nil {
					return outcome{}, err
				}
				return outcome{changes: res.ChangeSummary, permalink: permalinkOf(res.GetPermalink())}, nil
			}
			res, err := st.Refresh(ctx, opts...)
			if err != nil {
				return outcome{}, err
			}
			outs, err := st.Outputs(ctx)
			if err != nil {
				return outcome{}, err
			}
			return outcome{history: &res.Summary, outputs: outs, permalink: permalinkOf(res.GetPermalink())}, nil
		},
	})
}

// Destroy deletes the stack's resources, and the stack itself with remove;
// with preview_only it only reports what would be deleted.
func (s *Server) Destroy(req *agentpb.DestroyRequest, stream grpc.ServerStreamingServer[agentpb.OperationStream]) error {
	opts := []optdestroy.Option{optdestroy.UserAgent(execAgent), optdestroy.ShowSecrets(false)}
	if n := req.GetParallel(); n > 0 {
		opts = append(opts, optdestroy.Parallel(int(n)))
	}
	if m := req.GetMessage(); m != "" {
		opts = append(opts, optdestroy.Message(m))
	}
	if t := req.GetTarget(); len(t) > 0 {
		opts = append(opts, optdestroy.Target(t))
	}
	if req.GetTargetDependents() {
		opts = append(opts, optdestroy.TargetDependents())
	}
	if req.GetRefresh() {
		opts = append(opts, optdestroy.Refresh())
	}
	if req.GetContinueOnError() {
		opts = append(opts, optdestroy.ContinueOnError())
	}
	preview := req.GetPreviewOnly()
	remove := req.GetRemove() && !preview
	if remove {
		opts = append(opts, optdestroy.Remove())
	}
	op := operation{
		kind:        "destroy",
		mutating:    !preview,
		showSecrets: req.GetShowSecrets(),
		message:     req.GetMessage(),
		run: func(ctx context.Context, st auto.Stack, ch chan<- events.EngineEvent) (outcome, error) {
			opts := append(opts, optdestroy.EventStreams(ch))
			if preview {
				res, err := st.PreviewDestroy(ctx, opts...)
				if err != nil {
					return outcome{}, err
				}
				return outcome{changes: res.ChangeSummary, permalink: permalinkOf(res.GetPermalink())}, nil
			}
			res, err := st.Destroy(ctx, opts...)
			if err != nil {
				return outcome{}, err
			}
			return outcome{history: &res.Summary, permalink: permalinkOf(res.GetPermalink())}, nil
		},
	}
	if remove {
		op.after = func() {
			s.mu.Lock()
			s.stack = nil
			s.mu.Unlock()
			s.forgetWarmth()
		}
	}
	return s.operate(stream, op)
}

// operate runs op on the selected stack: it reports (and, for a mutating
// operation, clears) pending operations an interrupted run left, unless
// it knows the state to hold none (see observeState), runs the
// operation with lock recovery while streaming its events (all of it
// once more if damaged backend files explain a failure and are removed,
// see withSidecarRepair), and ends the
// stream with a Result. A failure once the engine was involved still sends
// the Result (with its error) before the stream ends with the error status.
func (s *Server) operate(stream grpc.ServerStreamingServer[agentpb.OperationStream], op operation) error {
	if err := s.checkReads(stream.Context()); err != nil {
		return err
	}
	st, err := s.selected()
	if err != nil {
		return err
	}
	if err := s.requireProject(); err != nil {
		return err
	}
	ctx, done, err := s.begin(stream.Context(), op.kind)
	if err != nil {
		return err
	}
	defer done()

	start := time.Now()
	repairs := newRepairLog(func(rec *agentpb.Recovery) error {
		return stream.Send(&agentpb.OperationStream{Response: &agentpb.OperationStream_Recovery{Recovery: rec}})
	})
	var out outcome
	var fw *forwarder
	var pending []*agentpb.PendingOperation
	// The export costs a CLI run; a warm agent that knows the state holds
	// no pending operation skips it.
	check := !s.stateClean(st.Name())
	if op.mutating {
		// Until it ends, a run may leave pending operations: an agent
		// killed meanwhile must not tell the next one the state is clean.
		s.updateCarried(st.Name(), func(c *carried) { c.Clean = false })
	}
	viewOf(st) // drop what an earlier call saw
	// A run whose engine began a resource step is not repeated.
	repeatable := func() bool { return fw == nil || fw.steps == 0 }
	err = s.withSidecarRepair(ctx, st.Name(), repairs, repeatable, func() error {
		if check {
			var err error
			if pending, err = s.pendingOperations(ctx, st); err != nil {
				return err
			}
		} else {
			s.log.V(1).Info("the state is known to hold no pending operations; not exported", "stack", st.Name())
		}
		if check {
			// Said whatever it found: a retry that finds nothing an
			// interrupted run left is as telling as one that does.
			s.log.Info("looked for pending operations", "stack", st.Name(), "count", len(pending))
		}
		if op.mutating && len(pending) > 0 {
			if err := s.clearPending(ctx, st, repairs, pending); err != nil {
				return err
			}
		}
		return s.withLockRecovery(ctx, st, repairs, func() error {
			fw = newForwarder(stream, s.secrets, s.log)
			if op.outputsFromEvents {
				watch(st, fw)
				defer watch(st, nil)
			}
			var err error
			out, err = op.run(ctx, st, fw.events)
			s.cli.dropAhead()
			fw.finish()
			return err
		})
	})

	res := s.result(op, out, fw, start, repairs.recovery(), pending)
	left := s.observeState(st, op, err, fw, pending)
	if len(left) > 0 && len(pending) == 0 {
		res.PendingOperations = left
	}
	if err != nil {
		var diags []diagnostic
		if fw != nil {
			diags = fw.diags
		}
		failure := s.fail(ctx, err, diags)
		res.Error = &agentpb.OperationError{Reason: string(failure.Reason), Message: failure.Message}
		res.Summary.Result = "failed"
		res.Summary.Message = failure.Message
		if stream.Context().Err() == nil {
			_ = stream.Send(&agentpb.OperationStream{Response: &agentpb.OperationStream_Result{Result: res}})
		}
		s.log.Info("operation failed", "kind", op.kind, "stack", st.Name(), "reason", string(failure.Reason), "message", failure.Message)
		return failure
	}
	if op.after != nil {
		op.after()
	}
	s.carryKey(ctx, st.Workspace(), st.Name())
	s.log.Info("operation succeeded", "kind", op.kind, "stack", st.Name())
	return stream.Send(&agentpb.OperationStream{Response: &agentpb.OperationStream_Result{Result: res}})
}

// checkReads refuses an operation the operator sent checked versions of
// the Secrets and ConfigMaps it reads with (readset.Header) unless this
// agent's environment was built from exactly those (Options.Reads): a
// Secret written between the operator's check and this agent's start is
// never used unseen. An operation sent without checked versions runs as
// before (nothing was checked: an ungoverned Stack, a preview).
func (s *Server) checkReads(ctx context.Context) error {
	sent := metadata.ValueFromIncomingContext(ctx, readset.Header)
	if len(sent) == 0 {
		return nil
	}
	if len(sent) > 1 {
		return agenterr.New(agenterr.InvalidArgument, "metadata %s: sent %d times, want once", readset.Header, len(sent))
	}
	checked, err := readset.Decode(sent[0])
	if err != nil {
		return agenterr.New(agenterr.InvalidArgument, "metadata %s: %v", readset.Header, err)
	}
	if s.opts.Reads == nil {
		return agenterr.New(agenterr.ReadsChanged, "the operator checked the versions of the Secrets and ConfigMaps this operation reads, "+
			"and this agent does not know which ones its environment was built from ($%s is unset): nothing ran", readset.EnvVar)
	}
	if msg := readset.Mismatch(s.opts.Reads, checked); msg != "" {
		return agenterr.New(agenterr.ReadsChanged, "%s: nothing ran; the agent restarts with the current versions", msg)
	}
	return nil
}

// observeState records whether the stack's state is known to hold no
// pending operation once op has run (see "Warm agent" in the package
// doc), from what the run showed: err, its events, the pending operations
// found before it, and the export that read its outputs, if any. It
// returns the pending operations that export found: another process's
// interrupted run, from before op, whose pending creates the engine keeps.
func (s *Server) observeState(st auto.Stack, op operation, err error, fw *forwarder, pending []*agentpb.PendingOperation) []*agentpb.PendingOperation {
	view := viewOf(st)
	// The state was clean before a mutating operation (pending operations
	// are cleared first), and one that succeeds leaves none of its own.
	clean := err == nil && (op.mutating || len(pending) == 0)
	if fw != nil && fw.pendingWarned {
		clean = false
	}
	var left []*agentpb.PendingOperation
	if view != nil && len(view.pending) > 0 {
		clean, left = false, view.pending
		s.log.Info("the stack's state holds pending operations after the operation", "stack", st.Name(), "count", len(left))
	}
	s.setStateClean(st.Name(), clean)
	return left
}

// permalinkOf keeps a permalink only when the backend has one.
func permalinkOf(link string, err error) string {
	if err != nil {
		return ""
	}
	return link
}
