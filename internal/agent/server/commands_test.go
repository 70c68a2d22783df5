package server_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/test/testenv"
)

// warmProgram is the program of the latency benchmark (test/bench): a file
// whose content is a config value, and a random suffix.
const warmProgram = `name: warm
runtime: yaml
config:
  path:
    type: string
  message:
    type: string
resources:
  greeting:
    type: stackyardtest:index:File
    properties:
      path: ${path}
      content: ${message}
  suffix:
    type: stackyardtest:index:Random
    properties:
      length: 6
outputs:
  sha256: ${greeting.sha256}
  suffix: ${suffix.result}
`

// commandLine matches the agent's log line for one CLI command it ran.
var commandLine = regexp.MustCompile(`"msg"="ran pulumi" "command"="([^"]*)"`)

// commands returns the CLI commands the agent has run so far, in order.
func (h *harness) commands() []string {
	var out []string
	for _, m := range commandLine.FindAllStringSubmatch(h.logs.String(), -1) {
		out = append(out, m[1])
	}
	return out
}

// commandsOf runs f and returns the CLI commands the agent ran meanwhile.
func (h *harness) commandsOf(f func()) []string {
	before := len(h.commands())
	f()
	return h.commands()[before:]
}

// setUp does what the Workspace controller's setup does for one stack:
// select it, creating it, and set its configuration.
func (h *harness) setUp(stack string, items ...*agentpb.ConfigItem) {
	h.t.Helper()
	if _, err := h.client.SelectStack(h.ctx(), &agentpb.SelectStackRequest{StackName: stack, Create: true, SkipSummary: true}); err != nil {
		h.t.Fatalf("SelectStack %s: %v", stack, err)
	}
	h.setConfig(items...)
}

// update does what the Update controller does for an up: Info, SelectStack
// as the Workspace declares the stack, Up with secrets shown.
func (h *harness) update(stack string) opRun {
	h.t.Helper()
	info, err := h.client.Info(h.ctx(), &agentpb.InfoRequest{SkipStack: true})
	if err != nil {
		h.t.Fatalf("Info: %v", err)
	}
	if info.GetProject() == "" || info.GetStack() != nil {
		h.t.Errorf("Info with skip_stack = %v; want the project only", info)
	}
	if _, err := h.client.SelectStack(h.ctx(), &agentpb.SelectStackRequest{StackName: stack, Create: true, SkipSummary: true}); err != nil {
		h.t.Fatalf("SelectStack %s: %v", stack, err)
	}
	return h.up(&agentpb.UpRequest{ShowSecrets: true})
}

// warmConfig is the configuration of warmProgram.
func warmConfig(path, message string) []*agentpb.ConfigItem {
	return []*agentpb.ConfigItem{literal("path", path, false), literal("message", message, false)}
}

// checkCommands fails the test unless got is want.
func checkCommands(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s ran the CLI commands %q; want %q", what, got, want)
	}
}

// checkHistoryAhead fails the test unless the last `pulumi stack history`
// the agent ran, an update's summary, was started ahead, beside the export
// that read the outputs.
func checkHistoryAhead(t *testing.T, h *harness) {
	t.Helper()
	lines := regexp.MustCompile(`"msg"="ran pulumi" "command"="stack history".*"startedAhead"=(true|false)`).FindAllStringSubmatch(h.logs.String(), -1)
	if len(lines) == 0 || lines[len(lines)-1][1] != "true" {
		t.Errorf("the update's `stack history` was not started ahead of its outputs' export (log lines %q)", lines)
	}
}

// checkHistoryAnswered fails the test unless the agent has answered the
// Automation API's `pulumi stack history` itself, n times so far.
func checkHistoryAnswered(t *testing.T, h *harness, n int) {
	t.Helper()
	if got := strings.Count(h.logs.String(), `"msg"="pulumi not run: the agent had the answer" "command"="stack history"`); got != n {
		t.Errorf("the agent answered `stack history` itself %d times; want %d", got, n)
	}
}

// checkGreeting fails the test unless the update wrote message to path and
// reported its digest.
func checkGreeting(t *testing.T, what string, r opRun, path, message string) {
	t.Helper()
	if b, err := os.ReadFile(path); err != nil || string(b) != message {
		t.Errorf("%s: the file holds %q (%v); want %q", what, b, err, message)
	}
	if got := output(t, r.result, "sha256"); got != sha256Hex(message) {
		t.Errorf("%s: output sha256 = %v; want the digest of %q", what, got, message)
	}
}

// TestCommandsPerUpdate records the CLI commands the agent runs for the
// calls the Workspace and Update controllers make (setup: SelectStack and
// SetAllConfig; update: Info, SelectStack and Up), for a first update on a
// fresh agent and for later ones on the same, warm, agent. Each command
// costs a CLI start and a read of the backend, so a command added back
// makes this fail.
func TestCommandsPerUpdate(t *testing.T) {
	h := newHarness(t, warmProgram)
	path := filepath.Join(t.TempDir(), "greeting.txt")

	// A fresh agent, a new stack: select it, creating it, with one
	// command; its configuration, none of it secret, is written into the
	// stack settings without the CLI. The stack was just created, so its
	// state holds no pending operation to look for: the update runs up
	// and reads outputs and summary.
	checkCommands(t, "the first setup", h.commandsOf(func() { h.setUp("dev", warmConfig(path, "v1")...) }),
		[]string{"stack select"})
	var r opRun
	checkCommands(t, "the first update", h.commandsOf(func() { r = h.update("dev").mustSucceed(t, "first update") }),
		[]string{"up"})
	checkHistoryAnswered(t, h, 1)
	checkGreeting(t, "the first update", r, path, "v1")
	if sum := r.result.GetSummary(); sum.GetKind() != "update" || sum.GetResult() != "succeeded" || r.result.GetChanges()["create"] != 3 {
		t.Errorf("first update: summary %v, changes %v; want a succeeded update, 3 creates", sum, r.result.GetChanges())
	}

	// A config change on the warm agent: the new value is written, with
	// no CLI command.
	checkCommands(t, "a setup with new configuration", h.commandsOf(func() { h.setUp("dev", warmConfig(path, "v2")...) }),
		nil)
	checkCommands(t, "an update on a warm agent", h.commandsOf(func() { r = h.update("dev").mustSucceed(t, "second update") }),
		[]string{"up"})
	checkGreeting(t, "the second update", r, path, "v2")
	if r.result.GetChanges()["update"] != 1 {
		t.Errorf("second update: changes %v; want 1 update", r.result.GetChanges())
	}

	// The same setup again changes nothing, so it runs nothing.
	checkCommands(t, "a setup without changes", h.commandsOf(func() { h.setUp("dev", warmConfig(path, "v2")...) }), nil)
	checkCommands(t, "an update without changes", h.commandsOf(func() { r = h.update("dev").mustSucceed(t, "third update") }),
		[]string{"up"})
	if r.result.GetChanges()["same"] != 3 {
		t.Errorf("third update: changes %v; want 3 same", r.result.GetChanges())
	}
	checkGreeting(t, "an update without changes", r, path, "v2")
	if got := output(t, r.result, "suffix"); len(fmt.Sprint(got)) != 6 {
		t.Errorf("an update without changes: output suffix = %v; want the 6 random characters", got)
	}
	checkHistoryAnswered(t, h, 3)
}

// TestCommandsAfterNewCommit is what the local runtime does when a new
// commit is fetched: a new agent process over the same project directory,
// backend and PULUMI_HOME, in a fresh checkout that holds no stack
// settings. It takes over what the previous agent recorded (the state
// clean, the secrets key material), so the update runs no more commands
// than on a warm agent but the stack's selection; an agent killed in the
// middle of an update records nothing, and the next one looks for pending
// operations again.
func TestCommandsAfterNewCommit(t *testing.T) {
	h := newHarness(t, warmProgram)
	path := filepath.Join(t.TempDir(), "greeting.txt")
	install := func() {
		t.Helper()
		if _, err := h.client.Install(h.ctx(), &agentpb.InstallRequest{}); err != nil {
			t.Fatalf("Install: %v", err)
		}
	}
	// A YAML program without packages has nothing to install
	// (install.go).
	checkCommands(t, "the first install", h.commandsOf(install), nil)
	h.setUp("dev", append(warmConfig(path, "v1"), literal("token", "carried-secret-1", true))...)
	h.update("dev").mustSucceed(t, "first update")

	// The new commit's checkout holds the program and no stack settings.
	h.restart(func() {
		if err := os.Remove(filepath.Join(h.dir, "Pulumi.dev.yaml")); err != nil {
			t.Fatal(err)
		}
	})
	var r opRun
	checkCommands(t, "the install of a YAML program after a new commit", h.commandsOf(install), nil)
	checkCommands(t, "the setup of a new agent after a new commit", h.commandsOf(func() {
		h.setUp("dev", append(warmConfig(path, "v2"), literal("token", "carried-secret-1", true))...)
	}), []string{"config set-all"})
	checkCommands(t, "its first update", h.commandsOf(func() { r = h.update("dev").mustSucceed(t, "update after a new commit") }),
		[]string{"up"})
	checkGreeting(t, "the update after a new commit", r, path, "v2")
	if !strings.Contains(h.logs.String(), "took over the secrets key material") {
		t.Error("the new agent did not take over the key material")
	}

	// An update that fails: the next agent looks for pending operations
	// again (so does one after an agent killed mid-run, which never
	// records its state clean: the record is cleared as each run begins).
	blocker := filepath.Join(t.TempDir(), "file")
	writeFile(t, blocker, "")
	h.setUp("dev", warmConfig(filepath.Join(blocker, "greeting.txt"), "v3")...)
	h.update("dev").mustFail(t, "update writing under a file", agenterr.ResourceFailed)
	h.restart(nil)
	h.setUp("dev", warmConfig(path, "v3")...)
	checkCommands(t, "the first update after a failed one", h.commandsOf(func() { r = h.update("dev").mustSucceed(t, "update after the failure") })[:1],
		[]string{"stack export"})
	checkGreeting(t, "the update after the failure", r, path, "v3")

	// The stack removed behind the agents' backs: the new agent trusts the
	// selection, its update fails for the missing stack and forgets it,
	// and the next one selects the stack with the CLI, creating it.
	h.restart(func() {
		rm := exec.Command("pulumi", "stack", "rm", "--yes", "--force", "--preserve-config", "--non-interactive", "--stack", "dev")
		rm.Dir = h.dir
		rm.Env = append(os.Environ(), "PULUMI_BACKEND_URL=file://"+h.backend)
		if out, err := rm.CombinedOutput(); err != nil {
			t.Fatalf("pulumi stack rm: %v\n%s", err, out)
		}
	})
	h.setUp("dev", warmConfig(path, "v4")...)
	h.update("dev").mustFail(t, "update of a removed stack", agenterr.StackNotFound)
	checkCommands(t, "the update after the stack was removed", h.commandsOf(func() { r = h.update("dev").mustSucceed(t, "update after the removal") }),
		[]string{"stack select", "up"})
	checkGreeting(t, "the update after the removal", r, path, "v4")
}

// TestWarmAgentRunsWhatIsNeeded checks each command a warm agent skips
// where it is still needed: selecting another stack, settings edited on
// disk behind the agent's back, an operation that failed, and pending
// operations another process's interrupted run left in the state.
func TestWarmAgentRunsWhatIsNeeded(t *testing.T) {
	h := newHarness(t, warmProgram)
	path := filepath.Join(t.TempDir(), "greeting.txt")
	h.setUp("dev", warmConfig(path, "v1")...)
	h.update("dev").mustSucceed(t, "first update")

	// Another stack: selected and set up with the CLI; back on dev, the
	// stack is selected again, but its configuration, which the other
	// stack's did not touch, is not set again.
	otherPath := filepath.Join(t.TempDir(), "other.txt")
	checkCommands(t, "setting up another stack", h.commandsOf(func() { h.setUp("other", warmConfig(otherPath, "o1")...) }),
		[]string{"stack select"})
	checkGreeting(t, "the other stack's update", h.update("other").mustSucceed(t, "update of the other stack"), otherPath, "o1")
	var r opRun
	checkCommands(t, "going back to dev", h.commandsOf(func() { h.setUp("dev", warmConfig(path, "v1")...) }),
		[]string{"stack select"})
	checkCommands(t, "an update of dev", h.commandsOf(func() { r = h.update("dev").mustSucceed(t, "update of dev") }),
		[]string{"up"})
	checkGreeting(t, "dev's update", r, path, "v1")

	// Someone edits the stack settings on disk: the configuration the
	// agent last set is set again, and the stack selected again.
	settings := filepath.Join(h.dir, "Pulumi.dev.yaml")
	b, err := os.ReadFile(settings)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), "warm:message: v1", "warm:message: edited", 1)
	if edited == string(b) {
		t.Fatalf("no message v1 in the stack settings:\n%s", b)
	}
	writeFile(t, settings, edited)
	checkCommands(t, "a setup after an edit on disk", h.commandsOf(func() { h.setUp("dev", warmConfig(path, "v1")...) }),
		[]string{"stack select"})
	checkGreeting(t, "the update after the edit", h.update("dev").mustSucceed(t, "update after the edit"), path, "v1")

	// An update that fails leaves the state in doubt: the next one
	// exports it first.
	h.setUp("dev", warmConfig(filepath.Join(path, "not-a-directory", "greeting.txt"), "v2")...)
	h.update("dev").mustFail(t, "update writing below a file", agenterr.ResourceFailed)
	h.setUp("dev", warmConfig(path, "v2")...)
	checkCommands(t, "the update after a failed one", h.commandsOf(func() { r = h.update("dev").mustSucceed(t, "update after the failure") }),
		[]string{"stack export", "up"})
	checkGreeting(t, "the update after the failure", r, path, "v2")

	// Another process leaves a pending create in the state. The warm
	// agent does not look before its update, which the engine runs
	// anyway, keeping the pending create; the export after it finds it
	// and the Result reports it. The next update clears it.
	pendingURN := "urn:pulumi:dev::warm::stackyardtest:index:File::elsewhere"
	h.addPendingCreate(t, "warm", "dev", pendingURN)
	checkCommands(t, "an update over another's pending create", h.commandsOf(func() { r = h.update("dev").mustSucceed(t, "update over a pending create") }),
		[]string{"up", "stack export", "stack history"})
	checkHistoryAhead(t, h)
	want := []string{pendingURN + " creating"}
	if got := pendingStrings(r.result.GetPendingOperations()); !slices.Equal(got, want) || r.result.GetRecovery() != nil {
		t.Errorf("update over a pending create reported pending %v, recovery %v; want %v, no recovery", got, r.result.GetRecovery(), want)
	}
	checkCommands(t, "the next update", h.commandsOf(func() { r = h.update("dev").mustSucceed(t, "update clearing the pending create") }),
		[]string{"stack export", "refresh", "stack history", "up"})
	if got := pendingStrings(r.result.GetRecovery().GetClearedPendingOperations()); !slices.Equal(got, want) {
		t.Errorf("the next update cleared %v; want %v", got, want)
	}
	checkCommands(t, "an update on a clean state", h.commandsOf(func() { r = h.update("dev").mustSucceed(t, "update on a clean state") }),
		[]string{"up"})
	if r.result.GetRecovery() != nil || len(r.result.GetPendingOperations()) != 0 {
		t.Errorf("an update on a clean state reported recovery %v, pending %v", r.result.GetRecovery(), r.result.GetPendingOperations())
	}

	// Someone removes the stack, keeping its settings file: the warm
	// agent's next update fails for it, and the one after selects the
	// stack with the CLI again, which creates it: a new stack, whose
	// empty state needs no export.
	rm := exec.Command("pulumi", "stack", "rm", "--yes", "--force", "--preserve-config", "--non-interactive", "--stack", "dev")
	rm.Dir = h.dir
	rm.Env = append(os.Environ(), "PULUMI_BACKEND_URL=file://"+h.backend)
	if out, err := rm.CombinedOutput(); err != nil {
		t.Fatalf("pulumi stack rm: %v\n%s", err, out)
	}
	h.update("dev").mustFail(t, "update of a removed stack", agenterr.StackNotFound)
	checkCommands(t, "the update after the stack was removed", h.commandsOf(func() { r = h.update("dev").mustSucceed(t, "update after the removal") }),
		[]string{"stack select", "up"})
	checkGreeting(t, "the update after the removal", r, path, "v2")
}

// addPendingCreate writes a pending create of urn into stack's state in
// the file backend, as another process's CLI killed in the middle of
// creating that resource leaves it.
func (h *harness) addPendingCreate(t *testing.T, project, stack, urn string) {
	t.Helper()
	path := filepath.Join(h.backend, ".pulumi", "stacks", project, stack+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	latest, ok := file["checkpoint"].(map[string]any)["latest"].(map[string]any)
	if !ok {
		t.Fatalf("no latest deployment in %s", path)
	}
	latest["pending_operations"] = []any{map[string]any{
		"type": "creating",
		"resource": map[string]any{
			"urn": urn, "custom": true, "type": "stackyardtest:index:File",
			"inputs": map[string]any{"path": "/nonexistent/elsewhere", "content": "x"},
		},
	}}
	if b, err = json.Marshal(file); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(b))
	if got := testenv.PendingOperations(h.backend, project, stack); !slices.Equal(got, []string{urn + " creating"}) {
		t.Fatalf("pending operations written = %v", got)
	}
}

// TestInstallWithProvidersOnPath: a program whose provider is on PATH only,
// with plugin downloads allowed. The plugin step of a recent CLI's `pulumi
// install` resolves providers without looking on PATH and tries to download
// this one, which fails (there is no network here, and no release of the
// test provider anywhere); the agent installs again without that step, and
// the update, whose engine finds the provider on PATH, succeeds. A YAML
// program is installed only when asked to reinstall; a program in another
// language always is.
func TestInstallWithProvidersOnPath(t *testing.T) {
	h := newHarnessEnv(t, warmProgram, map[string]string{"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "false"})
	checkCommands(t, "the install", h.commandsOf(func() {
		if _, err := h.client.Install(h.ctx(), &agentpb.InstallRequest{Reinstall: true}); err != nil {
			t.Fatalf("Install: %v", err)
		}
	}), []string{"install", "install"})
	if !strings.Contains(h.logs.String(), "could not install the program's plugins") ||
		!strings.Contains(h.logs.String(), "installing packages: could not find latest version for provider stackyardtest") {
		t.Errorf("the agent's log does not say the plugins are left to the operations:\n%s", h.logs.String())
	}
	h.setUp("dev", warmConfig(filepath.Join(t.TempDir(), "greeting.txt"), "v1")...)
	h.update("dev").mustSucceed(t, "the update after an install without plugins")
}
