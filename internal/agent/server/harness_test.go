package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/internal/agent/auth"
	"github.com/stackyard/stackyard/internal/agent/readset"
	"github.com/stackyard/stackyard/internal/agent/server"
	"github.com/stackyard/stackyard/test/testenv"
)

// testToken is the bearer token every test client presents.
const testToken = "test-token-0123456789"

// Paths set up by TestMain.
var (
	repoRoot     string
	repoBin      string
	stackyardBin string // `stackyard` built once for the subprocess tests
)

// requiredTools are the binaries the tests run; `make tools` builds them.
var requiredTools = []string{"pulumi", "pulumi-language-yaml", "pulumi-resource-stackyardtest"}

// TestMain isolates the Pulumi CLI from the machine (its own PULUMI_HOME,
// no update check, no plugin downloads, the repository's bin/ first on
// PATH), checks that the pinned tools are built, and builds the stackyard
// binary once for the tests that run the agent as a subprocess.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	_, self, _, _ := runtime.Caller(0)
	repoRoot = filepath.Clean(filepath.Join(filepath.Dir(self), "..", "..", ".."))
	repoBin = filepath.Join(repoRoot, "bin")
	for _, tool := range requiredTools {
		if _, err := os.Stat(filepath.Join(repoBin, tool)); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %s is missing from %s: run `make tools` first\n", tool, repoBin)
			return 1
		}
	}

	tmp, err := os.MkdirTemp("", "agent-server-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	// The agent's cache moves to tmp below; Go's build cache lives under
	// the same XDG directory by default, and must stay where it is, or
	// building the agent (BuildStackyard) starts from nothing: minutes.
	if os.Getenv("GOCACHE") == "" {
		out, err := exec.Command("go", "env", "GOCACHE").Output()
		if err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: go env GOCACHE:", err)
			return 1
		}
		_ = os.Setenv("GOCACHE", strings.TrimSpace(string(out)))
	}
	for k, v := range map[string]string{
		"PATH":                     repoBin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"PULUMI_HOME":              filepath.Join(tmp, "pulumi-home"),
		"PULUMI_BACKEND_URL":       "file://" + filepath.Join(tmp, "default-backend"),
		"PULUMI_CONFIG_PASSPHRASE": "test-passphrase",
		"PULUMI_SKIP_UPDATE_CHECK": "true",
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
		"PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK":    "true",
		"PULUMI_ACCESS_TOKEN":                         "",
		// The agent keeps the CLI's version there (cliVersion).
		"XDG_CACHE_HOME": filepath.Join(tmp, "cache"),
	} {
		_ = os.Setenv(k, v)
	}
	_ = os.MkdirAll(filepath.Join(tmp, "default-backend"), 0o755)

	if stackyardBin, err = testenv.BuildStackyard(tmp); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	return m.Run()
}

// harness is one agent over one project directory with its own backend,
// served over a real loopback listener with token authentication.
type harness struct {
	t       *testing.T
	dir     string
	backend string
	srv     *server.Server
	client  agentpb.AutomationServiceClient
	address string
	// logs holds everything the agent logged, at every verbosity.
	logs *testenv.SyncBuffer
	// env is added to the CLI's environment, over the backend's URL.
	env map[string]string
	// reads are the versions the agent is told its environment was built
	// from (server.Options.Reads); nil leaves them unknown.
	reads readset.Set
}

// addr is the address the agent listens on.
func (h *harness) addr() string { return h.address }

// newHarness writes program as the project's Pulumi.yaml (none when empty)
// and starts an agent over it.
func newHarness(t *testing.T, program string) *harness {
	t.Helper()
	return newHarnessEnv(t, program, nil)
}

// newHarnessEnv is newHarness with env added to the CLI's environment.
func newHarnessEnv(t *testing.T, program string, env map[string]string) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), backend: t.TempDir(), logs: &testenv.SyncBuffer{}, env: env}
	if program != "" {
		writeFile(t, filepath.Join(h.dir, "Pulumi.yaml"), program)
	}
	h.start(2 * time.Second)
	return h
}

// start starts the agent with the given grace period.
func (h *harness) start(grace time.Duration) {
	t := h.t
	env := map[string]string{"PULUMI_BACKEND_URL": "file://" + h.backend}
	maps.Copy(env, h.env)
	srv, err := server.New(server.Options{
		WorkDir:     h.dir,
		Env:         env,
		GracePeriod: grace,
		Reads:       h.reads,
		Log: funcr.New(func(prefix, args string) {
			_, _ = fmt.Fprintln(h.logs, prefix, args)
		}, funcr.Options{Verbosity: 10}),
	})
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	a := auth.NewStaticToken(testToken)
	g := server.NewGRPCServer(srv,
		grpc.ChainUnaryInterceptor(auth.UnaryInterceptor(a)),
		grpc.ChainStreamInterceptor(auth.StreamInterceptor(a)))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	h.srv = srv
	h.address = lis.Addr().String()
	h.client = dial(t, h.address, testToken)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		g.Stop()
		killStrays(h.dir)
	})
}

// restart shuts the agent down, as the runtime stops it, calls between
// (which changes the project directory while no agent runs), and starts
// a new agent over the same directory, backend and PULUMI_HOME.
func (h *harness) restart(between func()) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		h.t.Fatalf("Shutdown: %v", err)
	}
	if between != nil {
		between()
	}
	h.start(2 * time.Second)
}

// dial connects a client that presents token.
func dial(t *testing.T, addr, token string) agentpb.AutomationServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.BearerToken(token)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return agentpb.NewAutomationServiceClient(conn)
}

// ctx returns a context for one call, bounded so a hung engine fails the
// test instead of the whole run.
func (h *harness) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	h.t.Cleanup(cancel)
	return ctx
}

// selectStack selects (creating) stack "dev".
func (h *harness) selectStack() {
	h.t.Helper()
	if _, err := h.client.SelectStack(h.ctx(), &agentpb.SelectStackRequest{StackName: "dev", Create: true}); err != nil {
		h.t.Fatalf("SelectStack: %v", err)
	}
}

// setConfig sets items and fails the test on error.
func (h *harness) setConfig(items ...*agentpb.ConfigItem) {
	h.t.Helper()
	if _, err := h.client.SetAllConfig(h.ctx(), &agentpb.SetAllConfigRequest{Config: items}); err != nil {
		h.t.Fatalf("SetAllConfig: %v", err)
	}
}

// opRun is what one operation stream delivered.
type opRun struct {
	events []*agentpb.EngineEvent
	// recoveries are the Recovery messages, in order, and
	// eventsBeforeRecovery how many events came before the first.
	recoveries           []*agentpb.Recovery
	eventsBeforeRecovery int
	result               *agentpb.Result
	err                  error
}

// collect reads a stream to its end.
func collect(stream grpc.ServerStreamingClient[agentpb.OperationStream], err error) opRun {
	if err != nil {
		return opRun{err: err}
	}
	var r opRun
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return r
		}
		if err != nil {
			r.err = err
			return r
		}
		switch v := msg.GetResponse().(type) {
		case *agentpb.OperationStream_Event:
			r.events = append(r.events, v.Event)
		case *agentpb.OperationStream_Recovery:
			if len(r.recoveries) == 0 {
				r.eventsBeforeRecovery = len(r.events)
			}
			r.recoveries = append(r.recoveries, v.Recovery)
		case *agentpb.OperationStream_Result:
			if r.result != nil {
				r.err = errors.New("two results on one stream")
				return r
			}
			r.result = v.Result
		}
	}
}

// up runs Up and returns what it delivered.
func (h *harness) up(req *agentpb.UpRequest) opRun {
	ctx := h.ctx()
	return collect(h.client.Up(ctx, req))
}

// mustSucceed fails the test unless r succeeded with a result.
func (r opRun) mustSucceed(t *testing.T, what string) opRun {
	t.Helper()
	if r.err != nil {
		t.Fatalf("%s: %v (reason %s)", what, r.err, agenterr.ReasonOf(r.err))
	}
	if r.result == nil {
		t.Fatalf("%s: no result", what)
	}
	if r.result.GetSummary().GetResult() != "succeeded" {
		t.Fatalf("%s: summary result %q", what, r.result.GetSummary().GetResult())
	}
	return r
}

// mustFail fails the test unless r failed with reason.
func (r opRun) mustFail(t *testing.T, what string, reason agenterr.Reason) opRun {
	t.Helper()
	if r.err == nil {
		t.Fatalf("%s: succeeded, want reason %s", what, reason)
	}
	if got := agenterr.ReasonOf(r.err); got != reason {
		t.Fatalf("%s: reason %s, want %s (error: %v)", what, got, reason, r.err)
	}
	return r
}

// eventTypes counts the events of each type.
func (r opRun) eventTypes() map[string]int {
	out := map[string]int{}
	for _, e := range r.events {
		out[e.GetType()]++
	}
	return out
}

// output returns a non-secret output's value as Go data.
func output(t *testing.T, res *agentpb.Result, name string) any {
	t.Helper()
	v, ok := res.GetOutputs()[name]
	if !ok {
		t.Fatalf("no output %q in %v", name, res.GetOutputs())
	}
	return v.GetValue().AsInterface()
}

// wireText renders everything a run sent, for secret-leak checks.
func (r opRun) wireText() string {
	var b strings.Builder
	for _, e := range r.events {
		b.WriteString(protojson.Format(e))
	}
	if r.result != nil {
		b.WriteString(protojson.Format(r.result))
	}
	if r.err != nil {
		b.WriteString(r.err.Error())
	}
	return b.String()
}

// literal, structured and from build config items.
func literal(key, v string, secret bool) *agentpb.ConfigItem {
	return &agentpb.ConfigItem{Key: key, Secret: secret, V: &agentpb.ConfigItem_Literal{Literal: v}}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// killStrays kills processes left running in dir (plugins orphaned when a
// test SIGKILLs their CLI), so tests leave nothing behind.
func killStrays(dir string) {
	for _, pid := range testenv.ProcessesIn(dir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// waitFor polls cond until it holds or d has passed.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return cond()
}
