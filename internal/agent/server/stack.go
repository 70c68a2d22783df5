package server

import (
	"context"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
)

// WhoAmI returns the identity the CLI uses with the configured backend.
func (s *Server) WhoAmI(ctx context.Context, _ *agentpb.WhoAmIRequest) (*agentpb.WhoAmIResult, error) {
	ws, err := s.workspace(ctx)
	if err != nil {
		return nil, s.fail(ctx, err, nil)
	}
	who, err := ws.WhoAmIDetails(ctx)
	if err != nil {
		return nil, s.fail(ctx, err, nil)
	}
	return &agentpb.WhoAmIResult{User: who.User, Organizations: who.Organizations, Url: who.URL}, nil
}

// PulumiVersion returns the version of the CLI the agent runs.
func (s *Server) PulumiVersion(context.Context, *agentpb.PulumiVersionRequest) (*agentpb.PulumiVersionResult, error) {
	return &agentpb.PulumiVersionResult{Version: s.cli.Version().String()}, nil
}

// Info describes the project and the selected stack (or, before
// SelectStack, the stack the CLI has selected in the workspace, if any);
// with skip_stack only the project, without running the CLI.
func (s *Server) Info(ctx context.Context, req *agentpb.InfoRequest) (*agentpb.InfoResult, error) {
	if err := s.requireProject(); err != nil {
		return nil, err
	}
	ws, err := s.workspace(ctx)
	if err != nil {
		return nil, s.fail(ctx, err, nil)
	}
	proj, err := ws.ProjectSettings(ctx)
	if err != nil {
		return nil, s.fail(ctx, err, nil)
	}
	res := &agentpb.InfoResult{
		Project: string(proj.Name),
		Runtime: proj.Runtime.Name(),
		WorkDir: s.opts.WorkDir,
	}
	if req.GetSkipStack() {
		return res, nil
	}
	var name string
	if st, err := s.selected(); err == nil {
		name = st.Name()
	}
	summary, err := s.stackSummary(ctx, ws, name)
	if err != nil {
		return nil, s.fail(ctx, err, nil)
	}
	res.Stack = summary
	return res, nil
}

// SelectStack selects the stack the following calls work on, creating it
// first when req.Create is set (with req.SecretsProvider, if given). A
// workspace without key material for the stack's secrets adopts the one
// its state records (adoptStateSecretsKey). Selecting again what this
// agent has selected, with the same request, while the stack's settings
// files are unchanged runs no CLI command but the summary's.
func (s *Server) SelectStack(ctx context.Context, req *agentpb.SelectStackRequest) (*agentpb.SelectStackResult, error) {
	name := strings.TrimSpace(req.GetStackName())
	if name == "" {
		return nil, agenterr.New(agenterr.InvalidArgument, "stack_name is required")
	}
	if err := s.requireProject(); err != nil {
		return nil, err
	}
	ctx, done, err := s.begin(ctx, "SelectStack")
	if err != nil {
		return nil, err
	}
	defer done()

	sel := selection{name: name, create: req.GetCreate(), secretsProvider: req.GetSecretsProvider()}
	res := &agentpb.SelectStackResult{}
	err = s.withSidecarRepair(ctx, name, nil, func() bool { return true }, func() error {
		var ws auto.Workspace
		if s.selectionWarm(sel, s.settingsFingerprint(name)) {
			st, err := s.selected()
			if err != nil {
				return err
			}
			ws = st.Workspace()
			s.log.V(1).Info("stack already selected", "stack", name)
		} else {
			s.forgetSelection()
			var err error
			if ws, err = s.selectStack(ctx, sel); err != nil {
				return err
			}
			s.rememberSelection(sel, s.settingsFingerprint(name))
			s.log.Info("selected stack", "stack", name, "created", req.GetCreate())
		}
		if req.GetSkipSummary() {
			return nil
		}
		var err error
		res.Summary, err = s.stackSummary(ctx, ws, name)
		return err
	})
	if err != nil {
		return nil, s.fail(ctx, err, nil)
	}
	return res, nil
}

// selectStack selects (or creates) the stack sel names with the CLI,
// adopts its state's secrets key material, and makes it the selected
// stack; it returns the stack's workspace. A stack it has just created has
// an empty state, so the first operation need not export it to look for
// pending operations.
func (s *Server) selectStack(ctx context.Context, sel selection) (auto.Workspace, error) {
	var extra []auto.LocalWorkspaceOption
	if sel.secretsProvider != "" {
		extra = append(extra, auto.SecretsProvider(sel.secretsProvider))
	}
	ws, err := s.workspace(ctx, extra...)
	if err != nil {
		return nil, err
	}
	sw := ws.(*stateWorkspace)
	if sel.create {
		sw.creating = &sel
	}
	if s.firstSelection(sel.name) && s.loadCarried(sel.name).Selected == selectionKey(sel) {
		sw.trusted = sel.name
	}
	st, err := auto.SelectStack(ctx, sel.name, ws)
	created := sw.creating != nil && sw.created
	sw.creating, sw.trusted = nil, ""
	if err != nil {
		return nil, err
	}
	if created {
		// A new stack has key material of its own: nothing the previous
		// agent recorded of a stack of that name holds for it.
		s.updateCarried(st.Name(), func(c *carried) { *c = carried{} })
	}
	if err := s.adoptStateSecretsKey(ctx, ws, st); err != nil {
		return nil, err
	}
	s.setSelected(st)
	s.updateCarried(st.Name(), func(c *carried) { c.Selected = selectionKey(sel) })
	switch {
	case created:
		s.setStateClean(st.Name(), true)
	case s.loadCarried(st.Name()).Clean:
		s.log.Info("the previous agent left the state without pending operations", "stack", st.Name())
		s.setStateClean(st.Name(), true)
	}
	return ws, nil
}

// AddEnvironments adds ESC environments to the selected stack's
// configuration.
func (s *Server) AddEnvironments(ctx context.Context, req *agentpb.AddEnvironmentsRequest) (*agentpb.AddEnvironmentsResult, error) {
	st, err := s.selected()
	if err != nil {
		return nil, err
	}
	if len(req.GetEnvironment()) == 0 {
		return &agentpb.AddEnvironmentsResult{}, nil
	}
	ctx, done, err := s.begin(ctx, "AddEnvironments")
	if err != nil {
		return nil, err
	}
	defer done()
	if err := st.AddEnvironments(ctx, req.GetEnvironment()...); err != nil {
		return nil, s.fail(ctx, err, nil)
	}
	s.settingsWritten(st.Name(), s.settingsFingerprint(st.Name()))
	return &agentpb.AddEnvironmentsResult{}, nil
}

// stackSummary returns what `pulumi stack ls` says about the stack name, or
// about the workspace's current stack when name is empty; nil when there is
// no such stack.
func (s *Server) stackSummary(ctx context.Context, ws auto.Workspace, name string) (*agentpb.StackSummary, error) {
	stacks, err := ws.ListStacks(ctx)
	if err != nil {
		return nil, err
	}
	for _, sum := range stacks {
		if (name == "" && sum.Current) || (name != "" && sameStack(sum.Name, name)) {
			return toStackSummary(sum), nil
		}
	}
	return nil, nil
}

// sameStack reports whether a listed stack name denotes the requested one;
// a backend may list "org/project/dev" for "dev" or the other way round.
func sameStack(listed, requested string) bool {
	return listed == requested ||
		strings.HasSuffix(listed, "/"+requested) ||
		strings.HasSuffix(requested, "/"+listed)
}

func toStackSummary(sum auto.StackSummary) *agentpb.StackSummary {
	out := &agentpb.StackSummary{
		Name:             sum.Name,
		UpdateInProgress: sum.UpdateInProgress,
		Url:              sum.URL,
	}
	if sum.ResourceCount != nil {
		n := int32(*sum.ResourceCount) //nolint:gosec // resource counts fit
		out.ResourceCount = &n
	}
	if t, err := time.Parse(time.RFC3339Nano, sum.LastUpdate); err == nil {
		out.LastUpdate = timestamppb.New(t)
	}
	return out
}
