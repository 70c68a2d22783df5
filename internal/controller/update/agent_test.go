package update

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/types"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/internal/agent/auth"
	"github.com/stackyard/stackyard/internal/agent/server"
	stackruntime "github.com/stackyard/stackyard/internal/runtime"
)

// testPassphrase encrypts the secrets of the tests' stacks.
const testPassphrase = "update-controller-test"

// testStack is the stack every test workspace selects.
const testStack = "dev"

// program is the Pulumi YAML program of every test workspace. Its config
// picks the behaviour: sleep makes the Sleep resource take that many
// seconds, fail makes the Fail resource fail. It has one plain and one
// secret output from the Random resource, and one whose name a Secret key
// cannot hold.
const program = `name: yard
runtime: yaml
config:
  sleep:
    type: integer
    default: 0
  fail:
    type: boolean
    default: false
resources:
  rnd:
    type: stackyardtest:index:Random
    properties:
      length: 24
  nap:
    type: stackyardtest:index:Sleep
    properties:
      seconds: ${sleep}
  boom:
    type: stackyardtest:index:Fail
    properties:
      message: the boom resource failed on purpose
      fail: ${fail}
outputs:
  plain: ${rnd.result}
  token: ${rnd.secretResult}
  answer/key: 42
`

// randomURN and sleepURN are URNs of the program's resources.
const (
	randomURN = "urn:pulumi:dev::yard::stackyardtest:index:Random::rnd"
	sleepURN  = "urn:pulumi:dev::yard::stackyardtest:index:Sleep::nap"
)

// testAgent is a real workspace agent serving a project directory with the
// test program over loopback, with a static token, as the local runtime
// would start it, but in the test's process.
type testAgent struct {
	dir     string
	address string
	token   string
	// client talks to the agent as the test, e.g. to keep it busy.
	client agentpb.AutomationServiceClient
	// deadlines counts the streams that reached the agent with a deadline.
	deadlines *atomic.Int32
	// busy counts the calls the agent refused as busy with another call.
	busy *atomic.Int32
}

// testRuntime implements the runtime contract over the test's agents: the
// only piece of the Update controller's surroundings the tests provide
// themselves, because the real runtimes are written elsewhere.
type testRuntime struct {
	mu     sync.Mutex
	agents map[types.NamespacedName]*testAgent
}

var _ stackruntime.Runtime = (*testRuntime)(nil)

func (rt *testRuntime) agent(ws *autov1alpha1.Workspace) *testAgent {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.agents[types.NamespacedName{Namespace: ws.Namespace, Name: ws.Name}]
}

// Name identifies the runtime.
func (rt *testRuntime) Name() string { return "test" }

// Ensure reports the test's agent of ws.
func (rt *testRuntime) Ensure(_ context.Context, ws *autov1alpha1.Workspace) (stackruntime.Status, error) {
	a := rt.agent(ws)
	if a == nil {
		return stackruntime.Status{Message: "no agent"}, nil
	}
	return stackruntime.Status{Ready: true, Address: a.address}, nil
}

// Idle does nothing: the test owns its agents.
func (rt *testRuntime) Idle(context.Context, *autov1alpha1.Workspace) error { return nil }

// Delete does nothing: the test owns its agents.
func (rt *testRuntime) Delete(context.Context, *autov1alpha1.Workspace) error { return nil }

// Dial connects to the test's agent of ws with its token.
func (rt *testRuntime) Dial(_ context.Context, ws *autov1alpha1.Workspace) (*grpc.ClientConn, error) {
	a := rt.agent(ws)
	if a == nil {
		return nil, fmt.Errorf("no agent for workspace %s", ws.Name)
	}
	return grpc.NewClient(a.address,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.BearerToken(a.token)))
}

// startAgent starts a real agent over a fresh copy of the program with a
// file:// backend of its own.
func startAgent(t *testing.T) *testAgent {
	t.Helper()
	dir, backend := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte(program), 0o600); err != nil {
		t.Fatal(err)
	}
	token, err := auth.GenerateToken()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{
		WorkDir:     dir,
		Env:         map[string]string{"PULUMI_BACKEND_URL": "file://" + backend, "PULUMI_CONFIG_PASSPHRASE": testPassphrase},
		GracePeriod: 5 * time.Second,
	})
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	authz := auth.NewStaticToken(token)
	deadlines, busy := &atomic.Int32{}, &atomic.Int32{}
	countDeadlines := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if _, ok := ss.Context().Deadline(); ok {
			deadlines.Add(1)
		}
		err := handler(srv, ss)
		if agenterr.ReasonOf(err) == agenterr.AgentBusy {
			busy.Add(1)
		}
		return err
	}
	countBusy := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if agenterr.ReasonOf(err) == agenterr.AgentBusy {
			busy.Add(1)
		}
		return resp, err
	}
	g := server.NewGRPCServer(srv,
		grpc.ChainUnaryInterceptor(auth.UnaryInterceptor(authz), countBusy),
		grpc.ChainStreamInterceptor(auth.StreamInterceptor(authz), countDeadlines))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.BearerToken(token)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		g.Stop()
	})
	return &testAgent{dir: dir, address: lis.Addr().String(), token: token,
		client: agentpb.NewAutomationServiceClient(conn), deadlines: deadlines, busy: busy}
}
