package provider

// Tests that run the provider under the real Pulumi engine: the pinned
// `pulumi` CLI and `pulumi-language-yaml` host that `make tools` builds into
// bin/, with a YAML program and a file:// backend in temporary directories.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// engineBinaries are the programs, all in bin/, that the engine tests run.
var engineBinaries = []string{"pulumi", "pulumi-language-yaml", "pulumi-resource-" + Name}

// binDir returns the repository's bin/ after checking that every engine
// binary is there and that the provider binary is not older than its
// sources. It fails the test (never skips it) when they are not, since a
// silently skipped engine test hides real breakage.
func binDir(t *testing.T) string {
	t.Helper()
	// go test runs a package's tests in the package's directory, which is
	// test/provider under the repository root.
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Clean(filepath.Join(wd, "..", ".."))
	if mod, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil ||
		!strings.Contains(string(mod), "module github.com/stackyard/stackyard\n") {
		t.Fatalf("cannot find the repository root from %s (read %s/go.mod: %v)", wd, root, err)
	}
	bin := filepath.Join(root, "bin")
	for _, name := range engineBinaries {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			t.Fatalf("%s is missing from %s: run `make tools` first (these tests run the real Pulumi engine): %v",
				name, bin, err)
		}
	}
	provider, _ := os.Stat(filepath.Join(bin, "pulumi-resource-"+Name))
	sources, _ := filepath.Glob(filepath.Join(wd, "*.go"))
	sources = append(sources, filepath.Join(wd, "schema.json"), filepath.Join(wd, "cmd", "pulumi-resource-"+Name, "main.go"))
	for _, src := range sources {
		if strings.HasSuffix(src, "_test.go") {
			continue
		}
		if info, err := os.Stat(src); err == nil && info.ModTime().After(provider.ModTime()) {
			t.Fatalf("%s is older than %s: run `make tools` to rebuild it", filepath.Join(bin, provider.Name()), src)
		}
	}
	return bin
}

// pulumiEnv is one isolated Pulumi setup: a project directory, a file://
// backend and a PULUMI_HOME, all temporary, and bin/ first on PATH.
type pulumiEnv struct {
	t   *testing.T
	bin string
	dir string
	env []string
}

func newPulumiEnv(t *testing.T) *pulumiEnv {
	t.Helper()
	bin := binDir(t)
	env := []string{}
	for _, kv := range os.Environ() {
		// Nothing from the developer's own Pulumi setup may leak in.
		if !strings.HasPrefix(kv, "PULUMI_") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"PULUMI_BACKEND_URL=file://"+t.TempDir(),
		"PULUMI_CONFIG_PASSPHRASE=test",
		"PULUMI_HOME="+t.TempDir(),
		"PULUMI_SKIP_UPDATE_CHECK=true",
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CONFIG_NOSYSTEM=1",
	)
	return &pulumiEnv{t: t, bin: bin, dir: t.TempDir(), env: env}
}

// writeProgram writes Pulumi.yaml: a YAML project named e2e whose body (the
// resources and outputs sections) is given.
func (e *pulumiEnv) writeProgram(body string) {
	e.t.Helper()
	text := "name: e2e\nruntime: yaml\n" + body
	if err := os.WriteFile(filepath.Join(e.dir, "Pulumi.yaml"), []byte(text), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// command returns `pulumi args...` ready to run in the project directory.
func (e *pulumiEnv) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(e.bin, "pulumi"), append(args, "--non-interactive")...)
	cmd.Dir = e.dir
	cmd.Env = e.env
	return cmd
}

// run runs pulumi and returns its stdout and stderr together.
func (e *pulumiEnv) run(args ...string) (string, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := e.command(ctx, args...).CombinedOutput()
	return string(out), err
}

// mustRun runs pulumi and fails the test, showing the output, if it fails.
func (e *pulumiEnv) mustRun(args ...string) string {
	e.t.Helper()
	out, err := e.run(args...)
	if err != nil {
		e.t.Fatalf("pulumi %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// mustFail runs pulumi, fails the test if it succeeds, and returns its output.
func (e *pulumiEnv) mustFail(args ...string) string {
	e.t.Helper()
	out, err := e.run(args...)
	if err == nil {
		e.t.Fatalf("pulumi %s succeeded, want a failure\n%s", strings.Join(args, " "), out)
	}
	return out
}

// outputs returns the stack outputs, secrets shown in plain text if asked.
func (e *pulumiEnv) outputs(showSecrets bool) map[string]any {
	e.t.Helper()
	args := []string{"stack", "output", "--json"}
	if showSecrets {
		args = append(args, "--show-secrets")
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(e.mustRun(args...)), &out); err != nil {
		e.t.Fatalf("stack outputs: %v", err)
	}
	return out
}

// exportedResource is the part of a resource in `pulumi stack export` that
// the tests look at.
type exportedResource struct {
	URN     string         `json:"urn"`
	Type    string         `json:"type"`
	Inputs  map[string]any `json:"inputs"`
	Outputs map[string]any `json:"outputs"`
}

// export returns the stack's state (secrets encrypted) and its raw text.
func (e *pulumiEnv) export() (map[string]exportedResource, string) {
	e.t.Helper()
	raw := e.mustRun("stack", "export")
	var state struct {
		Deployment struct {
			Resources []exportedResource `json:"resources"`
		} `json:"deployment"`
	}
	if err := json.Unmarshal([]byte(raw), &state); err != nil {
		e.t.Fatalf("stack export: %v\n%s", err, raw)
	}
	byName := map[string]exportedResource{}
	for _, r := range state.Deployment.Resources {
		byName[r.URN[strings.LastIndex(r.URN, "::")+2:]] = r
	}
	return byName, raw
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// lifecycleProgram uses every resource; keeper feeds Random's keepers.
func lifecycleProgram(path, keeper string) string {
	return fmt.Sprintf(`resources:
  greeting:
    type: stackyardtest:index:File
    properties:
      path: %s
      content: hello
  token:
    type: stackyardtest:index:Random
    properties:
      length: 12
      keepers:
        generation: %s
  pause:
    type: stackyardtest:index:Sleep
    properties:
      seconds: 1
  gate:
    type: stackyardtest:index:Fail
    properties:
      message: the gate is open
      fail: false
outputs:
  sha256: ${greeting.sha256}
  token: ${token.result}
  secretToken: ${token.secretResult}
`, strconv.Quote(path), strconv.Quote(keeper))
}

func TestEngineLifecycle(t *testing.T) {
	e := newPulumiEnv(t)
	path := filepath.Join(t.TempDir(), "out", "greeting.txt")
	e.writeProgram(lifecycleProgram(path, "1"))
	e.mustRun("stack", "init", "dev")

	start := time.Now()
	e.mustRun("up", "--yes", "--skip-preview")
	if d := time.Since(start); d < time.Second {
		t.Errorf("up took %v, but the Sleep resource alone takes 1s", d)
	}
	if got := readFile(t, path); got != "hello" {
		t.Errorf("file content = %q, want hello", got)
	}

	outs := e.outputs(true)
	if outs["sha256"] != sha256Hex("hello") {
		t.Errorf("sha256 output = %v", outs["sha256"])
	}
	token, _ := outs["token"].(string)
	secret, _ := outs["secretToken"].(string)
	if len(token) != 12 || len(secret) != 12 || token == secret {
		t.Errorf("token = %q, secretToken = %q: want two different 12-character strings", token, secret)
	}
	if hidden := e.outputs(false)["secretToken"]; hidden != "[secret]" {
		t.Errorf("secretToken without --show-secrets = %v, want [secret]", hidden)
	}
	state, raw := e.export()
	if strings.Contains(raw, secret) {
		t.Error("the secret result is stored in plain text in the state")
	}
	if sec, ok := state["token"].Outputs["secretResult"].(map[string]any); !ok || sec["ciphertext"] == nil {
		t.Errorf("state secretResult = %v, want an encrypted secret", state["token"].Outputs["secretResult"])
	}

	// Nothing changed: the program matches the state, and no update re-runs.
	e.mustRun("preview", "--expect-no-changes")

	// Drift: edit the file by hand. Refresh reads it back into the state,
	// after which the program (content: hello) differs from the state.
	if err := os.WriteFile(path, []byte("edited by hand"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.mustRun("refresh", "--yes", "--skip-preview")
	state, _ = e.export()
	if got := state["greeting"].Outputs["content"]; got != "edited by hand" {
		t.Errorf("after refresh the state's content = %v, want the edit", got)
	}
	if got := state["greeting"].Outputs["sha256"]; got != sha256Hex("edited by hand") {
		t.Errorf("after refresh the state's sha256 = %v", got)
	}
	out := e.mustFail("preview", "--expect-no-changes")
	if !strings.Contains(out, "greeting") {
		t.Errorf("preview after drift does not show the file changing:\n%s", out)
	}
	e.mustRun("up", "--yes", "--skip-preview")
	if got := readFile(t, path); got != "hello" {
		t.Errorf("after up the file = %q, want hello again", got)
	}
	if again := e.outputs(true)["token"]; again != token {
		t.Errorf("token changed from %q to %v though its inputs did not", token, again)
	}

	// A keeper change replaces Random, and so yields a new string.
	e.writeProgram(lifecycleProgram(path, "2"))
	out = e.mustRun("up", "--yes", "--skip-preview")
	if again := e.outputs(true)["token"]; again == token {
		t.Errorf("token stayed %q after its keepers changed\n%s", token, out)
	}

	e.mustRun("destroy", "--yes", "--skip-preview")
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the file survived destroy (stat: %v)", err)
	}
}

func TestEngineFailures(t *testing.T) {
	e := newPulumiEnv(t)
	e.writeProgram(`resources:
  gate:
    type: stackyardtest:index:Fail
    properties:
      message: the gate was told to fail
      fail: true
`)
	e.mustRun("stack", "init", "dev")
	out := e.mustFail("up", "--yes", "--skip-preview")
	if !strings.Contains(out, "the gate was told to fail") {
		t.Errorf("up output lacks the Fail resource's message:\n%s", out)
	}

	e.writeProgram(`resources:
  token:
    type: stackyardtest:index:Random
    properties:
      length: 0
`)
	out = e.mustFail("up", "--yes", "--skip-preview")
	if !strings.Contains(out, "length: must be a positive integer") {
		t.Errorf("up output lacks the Check failure naming length:\n%s", out)
	}
}

// runningUp is a `pulumi up` started in the background.
type runningUp struct {
	cmd    *exec.Cmd
	out    *bytes.Buffer // stdout and stderr; read only once done is closed
	done   chan struct{} // closed when the process has exited
	result error         // the process's exit status, set before done closes
}

// startUp starts `pulumi up` on a program whose Sleep resource "pause"
// sleeps 60s, and returns once the engine has begun creating it.
func startUp(t *testing.T, e *pulumiEnv) *runningUp {
	t.Helper()
	e.writeProgram(`resources:
  pause:
    type: stackyardtest:index:Sleep
    properties:
      seconds: 60
`)
	e.mustRun("stack", "init", "dev")
	events := filepath.Join(t.TempDir(), "events.jsonl")
	up := &runningUp{out: &bytes.Buffer{}, done: make(chan struct{})}
	up.cmd = e.command(context.Background(), "up", "--yes", "--skip-preview", "--event-log", events)
	// --event-log, the engine's stream of JSON events, exists only with
	// PULUMI_DEBUG_COMMANDS set (as the Automation API sets it).
	up.cmd.Env = append(up.cmd.Env, "PULUMI_DEBUG_COMMANDS=true")
	up.cmd.Stdout, up.cmd.Stderr = up.out, up.out
	if err := up.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		up.result = up.cmd.Wait()
		close(up.done)
	}()
	t.Cleanup(func() {
		_ = up.cmd.Process.Kill()
		<-up.done
	})
	deadline := time.After(time.Minute)
	for !sleepStarted(events) {
		select {
		case <-up.done:
			t.Fatalf("up ended (%v) before creating the Sleep resource\n%s", up.result, up.out.String())
		case <-deadline:
			t.Fatalf("the engine never started creating the Sleep resource")
		case <-time.After(100 * time.Millisecond):
		}
	}
	return up
}

// sleepStarted reports whether the event log shows the engine beginning to
// create the Sleep resource.
func sleepStarted(eventLog string) bool {
	f, err := os.Open(eventLog)
	if err != nil {
		return false
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	scanner.Buffer(nil, 1<<20)
	for scanner.Scan() {
		var ev struct {
			ResourcePreEvent *struct {
				Metadata struct {
					Op   string `json:"op"`
					Type string `json:"type"`
				} `json:"metadata"`
			} `json:"resourcePreEvent"`
		}
		if json.Unmarshal(scanner.Bytes(), &ev) == nil && ev.ResourcePreEvent != nil &&
			ev.ResourcePreEvent.Metadata.Type == SleepType && ev.ResourcePreEvent.Metadata.Op == "create" {
			return true
		}
	}
	return false
}

// TestEngineCancel interrupts `pulumi up` (SIGINT, as Ctrl-C does) while a
// Sleep resource is being created: the engine asks the provider to cancel,
// and the 60s sleep ends early, failing the update. What shows it is the
// order of events, not a time: the sleep reports that it was cancelled,
// which it does only when the cancellation comes before its end.
func TestEngineCancel(t *testing.T) {
	e := newPulumiEnv(t)
	up := startUp(t, e)
	if err := up.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-up.done:
	case <-time.After(3 * time.Minute):
		t.Fatal("up still running 3 minutes after SIGINT, long after its 60s sleep")
	}
	if up.result == nil {
		t.Errorf("interrupted up succeeded\n%s", up.out.String())
	}
	if !strings.Contains(up.out.String(), "sleep of 1m0s cancelled after") {
		t.Errorf("up output does not show the sleep cancelled before its end:\n%s", up.out.String())
	}
}

// TestEngineKilledProviderExits kills `pulumi up` with SIGKILL mid-sleep,
// as a crashed or OOM-killed engine would be. The engine cannot stop its
// plugins then, so the provider must notice and exit by itself.
func TestEngineKilledProviderExits(t *testing.T) {
	e := newPulumiEnv(t)
	up := startUp(t, e)
	var provider, others []int
	for _, pid := range childPIDs(up.cmd.Process.Pid) {
		if processName(pid) == "pulumi-resource-"+Name {
			provider = append(provider, pid)
		} else {
			others = append(others, pid)
		}
	}
	// The other children (the YAML language host) are not this provider's
	// business, but the test must not leave them running either.
	t.Cleanup(func() {
		for _, pid := range others {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if len(provider) != 1 {
		t.Fatalf("found provider processes %v among the engine's children", provider)
	}
	if err := up.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-up.done
	// A generous bound on the wait, not a claim about speed: the provider
	// checks its parent every second, then takes at most a few seconds to
	// stop.
	deadline := time.Now().Add(2 * time.Minute)
	for syscall.Kill(provider[0], 0) == nil && processName(provider[0]) == "pulumi-resource-"+Name {
		if time.Now().After(deadline) {
			_ = syscall.Kill(provider[0], syscall.SIGKILL)
			t.Fatalf("the provider (pid %d) still runs 2 minutes after its engine was killed", provider[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// childPIDs lists the processes whose parent is ppid, from /proc.
func childPIDs(ppid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var pids []int
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// The fields after the command name (in parentheses, which may
		// itself contain spaces) are: state, ppid, ...
		rest := string(data[bytes.LastIndexByte(data, ')')+1:])
		fields := strings.Fields(rest)
		if len(fields) > 1 && fields[1] == strconv.Itoa(ppid) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			pids = append(pids, pid)
		}
	}
	return pids
}

// processName returns the base name of pid's executable, or "" if there is
// no such process (or it has exited and is a zombie).
func processName(pid int) string {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return ""
	}
	return filepath.Base(exe)
}
