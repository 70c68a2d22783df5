package workspace

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/runtime"
)

// legacyAnnotations are where releases before status.setup recorded it;
// they are dropped at the next setup and never trusted.
var legacyAnnotations = []string{
	"workspace.stackyard.dev/setup",
	"workspace.stackyard.dev/installed",
	"workspace.stackyard.dev/revision",
}

// ReasonAgentBusy is the Reconciling reason while the agent or a stack is
// busy with another operation.
const ReasonAgentBusy = "AgentBusy"

// connectTimeout bounds the wait for a freshly started agent to answer.
const connectTimeout = 30 * time.Second

// reconcileAuthorize asks the operator's choke point whether the agent of
// a Workspace that does not serve yet may start: it starts with the
// Workspace's environment, which for a Workspace made from a Stack holds
// the Stack's credentials (change.AuthorizeWorkspace). A refusal stalls
// the Workspace, with the refusal's reason, an event and a count, and
// starts nothing; a Workspace whose maker has not recorded it yet waits
// a moment.
func (r *Reconciler) reconcileAuthorize(ctx context.Context, s *session) (sreconcile.Result, error) {
	ws := s.ws
	if ws.Serving() {
		// Its agent was allowed to start; every operation in it is
		// decided again by the Update controller.
		return sreconcile.ResultEmpty, nil
	}
	v, err := change.AuthorizeWorkspace(ctx, r.APIReader, ws, r.now())
	switch {
	case err != nil:
		return sreconcile.ResultEmpty, sreconcile.NewGeneric("", fmt.Errorf("deciding whether the agent may start: %w", err))
	case v.Allowed:
		return sreconcile.ResultEmpty, nil
	case v.Wait:
		setActive(ws, false, ReasonStarting, v.Message)
		return sreconcile.ResultEmpty, sreconcile.NewWaiting(autov1alpha1.WorkspaceReasonPending, errors.New(v.Message), v.Recheck)
	}
	r.Options.Refusals.ObserveRefusal(AgentRefusal, v.Reason)
	return sreconcile.ResultEmpty, sreconcile.NewStalling(v.Reason, errors.New("the agent may not start: "+v.Message))
}

// AgentRefusal is the kind of operation a refused agent start is counted
// as, beside preview, up, refresh and destroy.
const AgentRefusal = "agent"

// reconcileAgent has the runtime run the agent with the current spec and
// waits until it serves.
func (r *Reconciler) reconcileAgent(ctx context.Context, s *session) (sreconcile.Result, error) {
	ws := s.ws
	st, err := r.Runtime.Ensure(ctx, ws)
	if err != nil {
		setActive(ws, false, ReasonStarting, "the agent cannot start: "+err.Error())
		return sreconcile.ResultEmpty, err
	}
	if !st.Ready {
		msg := cmp.Or(st.Message, "waiting for the agent to start")
		setActive(ws, false, ReasonStarting, msg)
		// A queued Workspace is woken by the runtime when its turn comes;
		// the longer wait is only a safety net, so that a thousand in
		// line do not reconcile every few seconds each.
		after := r.Options.StartInterval
		if st.Queued {
			after = r.Options.QueuedInterval
		}
		return sreconcile.ResultEmpty, sreconcile.NewWaiting(autov1alpha1.WorkspaceReasonPending, errors.New(msg), after)
	}
	s.agent = st
	return sreconcile.ResultEmpty, nil
}

// reconcileSetup sets the stacks up on the running agent unless
// status.setup records the same setup: version, install, then for each
// stack SelectStack, SetAllConfig and AddEnvironments, in spec order. The
// record is written with the rest of the status, in one patch.
func (r *Reconciler) reconcileSetup(ctx context.Context, s *session) (sreconcile.Result, error) {
	ws := s.ws
	want := setupDigest(ws, s.agent)
	done := ws.Status.Setup
	if done != nil && done.Digest == want && ws.Status.PulumiVersion != "" {
		r.markServing(ws, s)
		return sreconcile.ResultSuccess, nil
	}
	// Active goes False here and True when done, so its transition time
	// says when the agent was last set up (the idle clock starts there).
	setActive(ws, false, ReasonStarting, "setting the stacks up")

	ctx, cancel := context.WithTimeout(ctx, r.Options.SetupTimeout)
	defer cancel()
	conn, err := r.Runtime.Dial(ctx, ws)
	if err != nil {
		return sreconcile.ResultEmpty, sreconcile.NewGeneric("", fmt.Errorf("connecting to the agent: %w", err))
	}
	defer func() { _ = conn.Close() }()
	agent := agentpb.NewAutomationServiceClient(conn)

	connectCtx, cancelConnect := context.WithTimeout(ctx, connectTimeout)
	ver, err := agent.PulumiVersion(connectCtx, &agentpb.PulumiVersionRequest{}, grpc.WaitForReady(true))
	cancelConnect()
	if err != nil {
		return sreconcile.ResultEmpty, agentError(autov1alpha1.WorkspaceReasonPending, "connecting to the agent", err)
	}
	ws.Status.PulumiVersion = ver.GetVersion()
	if err := checkPulumiVersion(ver.GetVersion(), ws.Spec.SkipInstall); err != nil {
		return sreconcile.ResultEmpty, err
	}

	// Until this setup completes, the record holds at most the install:
	// a setup that fails half-way runs again whole, but `pulumi install`.
	ws.Status.Setup = nil
	if !ws.Spec.SkipInstall {
		installed := installDigest(s.agent)
		if done == nil || done.Installed != installed {
			if _, err := agent.Install(ctx, &agentpb.InstallRequest{}); err != nil {
				return sreconcile.ResultEmpty, agentError(autov1alpha1.WorkspaceReasonInstallFailed, "installing the program's dependencies", err)
			}
		}
		ws.Status.Setup = &autov1alpha1.WorkspaceSetup{Installed: installed}
	}
	for i := range ws.Spec.Stacks {
		if err := setUpStack(ctx, agent, i, &ws.Spec.Stacks[i]); err != nil {
			return sreconcile.ResultEmpty, err
		}
	}
	if ws.Status.Setup == nil {
		ws.Status.Setup = &autov1alpha1.WorkspaceSetup{}
	}
	ws.Status.Setup.Digest, ws.Status.Setup.Revision = want, s.agent.Revision
	for _, k := range legacyAnnotations {
		delete(ws.Annotations, k)
	}
	log.FromContext(ctx).Info("workspace set up", "stacks", len(ws.Spec.Stacks), "revision", s.agent.Revision)
	r.Recorder.Eventf(ws, nil, corev1.EventTypeNormal, autov1alpha1.WorkspaceReasonSucceeded, "Setup", "%s", readyMessage(ws, s))
	r.markServing(ws, s)
	return sreconcile.ResultSuccess, nil
}

// markServing records a set-up, running agent.
func (r *Reconciler) markServing(ws *autov1alpha1.Workspace, s *session) {
	ws.Status.Address = s.agent.Address
	markReady(ws, readyMessage(ws, s))
	setActive(ws, true, ReasonRunning, "the agent serves at "+s.agent.Address)
}

// readyMessage describes a set-up workspace.
func readyMessage(ws *autov1alpha1.Workspace, s *session) string {
	msg := fmt.Sprintf("%d stack(s) set up", len(ws.Spec.Stacks))
	if s.agent.Revision != "" {
		msg += " at revision " + s.agent.Revision
	}
	return msg
}

// setUpStack selects (or creates) one stack and applies its configuration
// and environments.
func setUpStack(ctx context.Context, agent agentpb.AutomationServiceClient, i int, stack *autov1alpha1.WorkspaceStack) error {
	field := fmt.Sprintf("spec.stacks[%d]", i)
	req := &agentpb.SelectStackRequest{StackName: stack.Name, Create: stack.Create != nil && *stack.Create,
		SecretsProvider: stack.SecretsProvider, SkipSummary: true}
	if _, err := agent.SelectStack(ctx, req); err != nil {
		what := fmt.Sprintf("%s: selecting stack %q", field, stack.Name)
		if agenterr.ReasonOf(err) == agenterr.StackNotFound {
			what += " (set create: true to create it)"
		}
		return agentError(autov1alpha1.WorkspaceReasonStackSetupFailed, what, err)
	}
	if len(stack.Config) > 0 {
		items, err := configItems(field, stack.Config)
		if err != nil {
			return err
		}
		if _, err := agent.SetAllConfig(ctx, &agentpb.SetAllConfigRequest{Config: items}); err != nil {
			return agentError(autov1alpha1.WorkspaceReasonStackSetupFailed, configField(field, stack.Config, err), err)
		}
	}
	if len(stack.Environment) > 0 {
		if _, err := agent.AddEnvironments(ctx, &agentpb.AddEnvironmentsRequest{Environment: stack.Environment}); err != nil {
			return agentError(autov1alpha1.WorkspaceReasonStackSetupFailed, field+".environment", err)
		}
	}
	return nil
}

// configField names the config item an agent error is about, from the key
// in its metadata: `spec.stacks[0].config[2] key "x"`.
func configField(field string, items []autov1alpha1.ConfigItem, err error) string {
	md := agenterr.MetadataOf(err)
	key := md["key"]
	if key == "" {
		key, _, _ = strings.Cut(md["keys"], ",")
	}
	for j, it := range items {
		if key != "" && (key == it.Key || (!strings.Contains(it.Key, ":") && strings.HasSuffix(key, ":"+it.Key))) {
			return fmt.Sprintf("%s.config[%d] key %q", field, j, it.Key)
		}
	}
	return field + ".config"
}

// agentError types an agent call's failure by what happens next: a busy
// agent or stack is waited for, failures a retry cannot fix (bad config,
// missing stack or project, program errors, unsupported features, refused
// credentials) stall with reason, and the rest (the agent unreachable, an
// unknown failure) are retried with backoff. The message is the agent's,
// which holds no secret.
func agentError(reason, what string, err error) error {
	msg := err.Error()
	if st, ok := status.FromError(err); ok {
		msg = st.Message()
	}
	wrapped := fmt.Errorf("%s: %s", what, msg)
	switch agenterr.ReasonOf(err) {
	case agenterr.AgentBusy, agenterr.UpdateConflict, agenterr.StackLocked:
		return sreconcile.NewWaiting(ReasonAgentBusy, wrapped, 0)
	case agenterr.InvalidConfig, agenterr.InvalidArgument, agenterr.StackNotFound, agenterr.StackAlreadyExists,
		agenterr.ProjectNotFound, agenterr.ProgramError, agenterr.Unsupported, agenterr.InvalidAccessToken, agenterr.MissingPlugin:
		if reason == autov1alpha1.WorkspaceReasonPending {
			reason = autov1alpha1.WorkspaceReasonStackSetupFailed
		}
		return sreconcile.NewStalling(reason, wrapped)
	default:
		return sreconcile.NewGeneric(reason, wrapped)
	}
}

// setupDigest digests what a setup applies to which agent: the instance,
// the revision, the stacks and whether install is skipped.
func setupDigest(ws *autov1alpha1.Workspace, agent runtime.Status) string {
	stacks, _ := json.Marshal(ws.Spec.Stacks)
	return digest([]string{agent.Instance, agent.Revision, string(stacks), fmt.Sprint(ws.Spec.SkipInstall)})
}

// installDigest digests what an install depends on: the agent instance
// and the source revision.
func installDigest(agent runtime.Status) string {
	return digest([]string{agent.Instance, agent.Revision})
}

// digest is a short hex SHA-256 of parts.
func digest(parts []string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:20]
}
