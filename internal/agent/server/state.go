package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/sig"

	"github.com/stackyard/stackyard/internal/agent/agentpb"
)

// maskedSecret is what `pulumi stack output --json` shows in place of a
// secret; the Automation API calls an output secret when its JSON holds it.
const maskedSecret = "[secret]"

// stateWorkspace is the agent's Automation API workspace: a LocalWorkspace
// whose StackOutputs, which auto.Stack.Up and the agent's Refresh call once
// the operation has run, takes the outputs from the run's own engine
// events when it watched them, and otherwise reads them from `pulumi stack
// export` without --show-secrets, which needs no secrets provider; either
// way it runs `pulumi stack output --show-secrets` only when some output
// is secret. The LocalWorkspace runs `pulumi stack output` twice, with and
// without --show-secrets. The export also tells the agent whether the state
// the operation left holds pending operations (see view); the events tell
// it too, through the engine's warning.
type stateWorkspace struct {
	auto.Workspace

	// watched, while set, is the forwarder of the up whose outputs the
	// next StackOutputs reads (see outputsFromEvents). auto.Stack.Up asks
	// for the summary right after the outputs; when they came from the
	// events, so does the summary, and `pulumi stack history` is not run;
	// otherwise it is started ahead, beside the export (ahead.go).
	watched *forwarder

	// creating, while set, makes SelectStack create the stack it selects
	// when there is none, and created records whether it did.
	creating *selection
	created  bool
	// trusted, while set, names a stack the previous agent selected with
	// the same request (carried.go): SelectStack of it runs no command.
	trusted string

	mu   sync.Mutex
	seen *stateView
}

// createdStack is how `pulumi stack select --create` starts the line it
// prints when it created the stack: on stdout up to Pulumi 3.170, on
// stderr in later versions. Not seeing it only costs the export a stack
// that already existed needs anyway.
const createdStack = "Created stack "

// printedCreated reports whether out has a line that says a stack was
// created.
func printedCreated(out string) bool {
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, createdStack) {
			return true
		}
	}
	return false
}

// SelectStack selects stackName as the LocalWorkspace does or, while
// creating is set, runs `pulumi stack select --create`: one CLI command
// for a new stack, where the Automation API's UpsertStack runs two (a
// select that fails, then `stack init`).
func (w *stateWorkspace) SelectStack(ctx context.Context, stackName string) error {
	if w.trusted != "" && w.trusted == stackName {
		w.trusted = ""
		return nil
	}
	if w.creating == nil {
		return w.Workspace.SelectStack(ctx, stackName)
	}
	args := []string{"stack", "select", "--create", "--stack", stackName}
	if p := w.creating.secretsProvider; p != "" {
		args = append(args, "--secrets-provider", p)
	}
	stdout, stderr, err := runCLIOutput(ctx, w, "failed to select stack", args...)
	if err != nil {
		return err
	}
	w.created = printedCreated(stdout) || printedCreated(stderr)
	return nil
}

// stateView is what an export after an operation showed.
type stateView struct {
	pending []*agentpb.PendingOperation
}

// StackOutputs returns the stack's outputs as the Automation API's
// LocalWorkspace does: every value in clear, marked secret when `pulumi
// stack output --json` shows "[secret]" in it.
func (w *stateWorkspace) StackOutputs(ctx context.Context, stack string) (auto.OutputMap, error) {
	if fw := w.watched; fw != nil {
		w.watched = nil
		if outs, ok, err := w.outputsFromEvents(ctx, fw, stack); ok || err != nil {
			return outs, err
		}
		if cli, ok := w.PulumiCommand().(*cliRunner); ok {
			cli.startAhead(ctx, w.WorkDir(), cliEnv(w), historyArgs(stack)...)
		}
	}
	dep, err := exportState(ctx, w, stack)
	if err != nil {
		return nil, err
	}
	stored, err := storedOutputs(dep)
	if err != nil {
		return nil, err
	}
	pending, err := pendingOf(dep)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.seen = &stateView{pending: pending}
	w.mu.Unlock()
	return w.reveal(ctx, stack, stored)
}

// outputsFromEvents returns the outputs of the up that fw watched, as its
// engine reported them, with ok set; an up that succeeded without the
// engine warning about pending operations from an earlier run leaves none
// in the state, so nothing needs exporting. Its summary is then the
// agent's own (the result's, see Server.result): `pulumi stack history` is
// answered with no entry instead of being run. ok is false when the events
// did not show the outputs, or the warning was given: the state must be
// read.
func (w *stateWorkspace) outputsFromEvents(ctx context.Context, fw *forwarder, stack string) (auto.OutputMap, bool, error) {
	seen, pendingWarned, ok := fw.outputsSeen(ctx)
	if !ok || pendingWarned {
		return nil, false, nil
	}
	stored := make(map[string]storedOutput, len(seen))
	for k, v := range seen {
		o, err := storedOutputOf(k, v)
		if err != nil {
			return nil, false, err
		}
		stored[k] = o
	}
	if cli, ok := w.PulumiCommand().(*cliRunner); ok {
		cli.answer(w.WorkDir(), historyArgs(stack), noHistory)
	}
	w.mu.Lock()
	w.seen = &stateView{}
	w.mu.Unlock()
	outs, err := w.reveal(ctx, stack, stored)
	return outs, true, err
}

// reveal returns the outputs stored holds, every value in clear: a secret
// one is read with `pulumi stack output --show-secrets`, run only when
// some output is encrypted.
func (w *stateWorkspace) reveal(ctx context.Context, stack string, stored map[string]storedOutput) (auto.OutputMap, error) {
	encrypted := false
	for _, o := range stored {
		encrypted = encrypted || o.encrypted
	}
	var revealed map[string]any
	if encrypted {
		// A secret's value is only in the state's ciphertext.
		text, err := runCLI(ctx, w, "could not get secret outputs", "stack", "output", "--json", "--show-secrets", "--stack", stack)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(text), &revealed); err != nil {
			return nil, fmt.Errorf("read the stack's secret outputs: %w", err)
		}
	}
	out := make(auto.OutputMap, len(stored))
	for k, o := range stored {
		v := o.value
		if revealed != nil {
			v = revealed[k]
		}
		out[k] = auto.OutputValue{Value: v, Secret: o.secret}
	}
	return out, nil
}

// view returns what the last StackOutputs showed of the state, nil if it
// has not run since the last call, and forgets it.
func (w *stateWorkspace) view() *stateView {
	w.mu.Lock()
	defer w.mu.Unlock()
	v := w.seen
	w.seen = nil
	return v
}

// watch has the next StackOutputs of st's workspace take the outputs from
// the events fw observes (outputsFromEvents); nil stops it.
func watch(st auto.Stack, fw *forwarder) {
	if w, ok := st.Workspace().(*stateWorkspace); ok {
		w.watched = fw
	}
}

// viewOf returns st's last state view (see stateWorkspace.view); nil when
// st is not over a stateWorkspace.
func viewOf(st auto.Stack) *stateView {
	if w, ok := st.Workspace().(*stateWorkspace); ok {
		return w.view()
	}
	return nil
}

// exportState returns the stack's state as stored, secrets encrypted:
// `pulumi stack export` without --show-secrets, which needs no secrets
// provider (no passphrase key derivation, no KMS or service call), where
// the Automation API's Export always reveals them.
func exportState(ctx context.Context, ws auto.Workspace, stack string) (apitype.UntypedDeployment, error) {
	var dep apitype.UntypedDeployment
	text, err := runCLI(ctx, ws, "could not export stack", "stack", "export", "--stack", stack)
	if err != nil {
		return dep, err
	}
	if err := json.Unmarshal([]byte(text), &dep); err != nil {
		return dep, fmt.Errorf("read exported deployment: %w", err)
	}
	return dep, nil
}

// runCLI runs a CLI command in ws's project directory with ws's
// environment, as the Automation API runs its own, and returns its
// stdout. A failure reads like the Automation API's ("<what>: <error>",
// then the code and stderr) so that fail classifies it alike; stdout is
// left out of it, as it may hold secrets.
func runCLI(ctx context.Context, ws auto.Workspace, what string, args ...string) (string, error) {
	stdout, _, err := runCLIOutput(ctx, ws, what, args...)
	return stdout, err
}

// runCLIOutput is runCLI returning the command's standard error too.
func runCLIOutput(ctx context.Context, ws auto.Workspace, what string, args ...string) (stdout, stderr string, err error) {
	stdout, stderr, code, err := ws.PulumiCommand().Run(ctx, ws.WorkDir(), nil, nil, nil, cliEnv(ws), args...)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w\ncode: %d\nstdout: \nstderr: %s", what, err, code, stderr)
	}
	return stdout, stderr, nil
}

// cliEnv is the environment the Automation API gives the CLI commands of
// ws: its PULUMI_HOME and environment variables.
func cliEnv(ws auto.Workspace) []string {
	var env []string
	if home := ws.PulumiHome(); home != "" {
		env = append(env, "PULUMI_HOME="+home)
	}
	for k, v := range ws.GetEnvVars() {
		env = append(env, k+"="+v)
	}
	return env
}

// storedOutput is a stack output as the stored state holds it.
type storedOutput struct {
	// value is the output's value; incomplete when encrypted is set.
	value any
	// secret is what the Automation API marks secret: "[secret]" is in the
	// output's JSON once its secrets are masked.
	secret bool
	// encrypted is set when the value holds a secret, whose value only
	// the secrets provider can read.
	encrypted bool
}

// storedOutputs reads the stack outputs, the outputs of the root stack
// resource, from an exported deployment.
func storedOutputs(dep apitype.UntypedDeployment) (map[string]storedOutput, error) {
	out := map[string]storedOutput{}
	if len(dep.Deployment) == 0 {
		return out, nil
	}
	var d struct {
		Resources []struct {
			Type    string         `json:"type"`
			Parent  string         `json:"parent"`
			Outputs map[string]any `json:"outputs"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(dep.Deployment, &d); err != nil {
		return nil, fmt.Errorf("read exported deployment: %w", err)
	}
	for _, r := range d.Resources {
		if r.Type != stackResourceType || r.Parent != "" {
			continue
		}
		for k, v := range r.Outputs {
			o, err := storedOutputOf(k, v)
			if err != nil {
				return nil, err
			}
			out[k] = o
		}
		break
	}
	return out, nil
}

// storedOutputOf reads the stack output k whose serialized value, as the
// state and the engine's events hold it, is v.
func storedOutputOf(k string, v any) (storedOutput, error) {
	masked, encrypted := maskSecrets(v)
	text, err := json.Marshal(masked)
	if err != nil {
		return storedOutput{}, fmt.Errorf("read stack output %q: %w", k, err)
	}
	return storedOutput{value: v, secret: strings.Contains(string(text), maskedSecret), encrypted: encrypted}, nil
}

// maskSecrets returns v, a property value as the state stores it, with
// each secret replaced by "[secret]", and whether it held one.
func maskSecrets(v any) (any, bool) {
	switch t := v.(type) {
	case map[string]any:
		if t[sig.Key] == sig.Secret {
			return maskedSecret, true
		}
		m, held := make(map[string]any, len(t)), false
		for k, e := range t {
			masked, found := maskSecrets(e)
			m[k], held = masked, held || found
		}
		return m, held
	case []any:
		m, held := make([]any, len(t)), false
		for i, e := range t {
			masked, found := maskSecrets(e)
			m[i], held = masked, held || found
		}
		return m, held
	default:
		return v, false
	}
}

// pendingOf lists the pending operations of an exported deployment.
func pendingOf(dep apitype.UntypedDeployment) ([]*agentpb.PendingOperation, error) {
	if len(dep.Deployment) == 0 {
		return nil, nil
	}
	var d struct {
		PendingOperations []struct {
			Resource struct {
				URN string `json:"urn"`
			} `json:"resource"`
			Type string `json:"type"`
		} `json:"pending_operations"`
	}
	if err := json.Unmarshal(dep.Deployment, &d); err != nil {
		return nil, fmt.Errorf("read exported deployment: %w", err)
	}
	out := make([]*agentpb.PendingOperation, 0, len(d.PendingOperations))
	for _, op := range d.PendingOperations {
		out = append(out, &agentpb.PendingOperation{Urn: op.Resource.URN, Type: op.Type})
	}
	return out, nil
}
