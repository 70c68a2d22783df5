package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"google.golang.org/grpc"

	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/internal/agent/readset"
	"github.com/stackyard/stackyard/internal/proc"
	"github.com/stackyard/stackyard/internal/redact"
)

// Options configure a Server.
type Options struct {
	// WorkDir is the Pulumi project directory, the one holding Pulumi.yaml.
	WorkDir string
	// PulumiPath is the pulumi binary to run; empty finds "pulumi" on PATH.
	PulumiPath string
	// PulumiHome sets PULUMI_HOME for the CLI; empty inherits the agent's.
	PulumiHome string
	// Env holds extra environment variables for every CLI run (for example
	// PULUMI_BACKEND_URL). They may be secret; they are never logged.
	Env map[string]string
	// GracePeriod is how long a cancelled CLI gets between SIGINT and SIGKILL;
	// zero means DefaultGracePeriod.
	GracePeriod time.Duration
	// ProcessRegistry is the directory where the agent records the process
	// tree of every CLI run while it runs (see proc.Registry); New ends
	// whatever the trees recorded there by a previous agent left running.
	// Empty means $STACKYARD_PROCESS_REGISTRY (proc.RegistryEnv), which
	// the local runtime sets; when that is empty too nothing is recorded,
	// and only the agent's own trees are ended.
	ProcessRegistry string
	// Reads are the versions of the Secrets and ConfigMaps the agent's
	// environment was built from. Nil means $STACKYARD_READ_SET
	// (readset.EnvVar), which the runtimes set; when that is unset too the
	// agent does not know them, and refuses every operation the operator
	// sends checked versions with (see checkReads).
	Reads readset.Set
	// Log receives the agent's own log lines; the zero value discards them.
	Log logr.Logger
}

// Server implements agentpb.AutomationServiceServer over one project
// directory. It runs one mutating call at a time (a second one fails at
// once with AgentBusy rather than queueing behind a long update); read-only
// calls run alongside.
type Server struct {
	agentpb.UnimplementedAutomationServiceServer

	opts    Options
	cli     *cliRunner
	log     logr.Logger
	secrets *redact.Set

	// busy is a one-slot semaphore held by the running mutating call.
	busy chan string

	mu    sync.Mutex
	stack *auto.Stack
	warm  warmth

	// shutdown is cancelled by Shutdown; every operation's context hangs
	// off it, so that stopping the agent cancels the running CLI.
	shutdown context.Context
	stopAll  context.CancelFunc
	running  sync.WaitGroup
}

var _ agentpb.AutomationServiceServer = (*Server)(nil)

// New returns a Server for the project in opts.WorkDir. It fails when the
// pulumi CLI cannot be found; a missing Pulumi.yaml is reported by the calls
// that need it (reason ProjectNotFound), so the agent can start before the
// program has been fetched.
func New(opts Options) (*Server, error) {
	if opts.WorkDir == "" {
		return nil, errors.New("server: WorkDir is required")
	}
	dir, err := filepath.Abs(opts.WorkDir)
	if err != nil {
		return nil, err
	}
	opts.WorkDir = dir
	log := opts.Log
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	cli, err := newCLIRunner(opts.PulumiPath, opts.GracePeriod, log)
	if err != nil {
		return nil, err
	}
	if cli.trees, err = sweepPredecessor(cmp.Or(opts.ProcessRegistry, os.Getenv(proc.RegistryEnv)), log); err != nil {
		return nil, err
	}
	if opts.Reads == nil {
		if text, ok := os.LookupEnv(readset.EnvVar); ok {
			if opts.Reads, err = readset.Decode(text); err != nil {
				return nil, fmt.Errorf("$%s: %w", readset.EnvVar, err)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		opts: opts,
		cli:  cli,
		log:  log,
		// The runtime names the environment variables read from Secrets
		// (redact.SecretEnvVar): their values are masked like secret
		// config from the start.
		secrets:  redact.New(redact.SecretEnvValues(nil)...),
		busy:     make(chan string, 1),
		shutdown: ctx,
		stopAll:  cancel,
	}, nil
}

// sweepPredecessor opens the registry in dir (none when dir is empty) and
// ends what a previous agent's CLI runs left there: a killed agent's CLI
// dies with it, but the providers it started may still be inside a
// resource operation. Nothing may run over the workspace before they are
// gone, above all not the recovery of the run they belonged to, so an
// error here stops the agent.
func sweepPredecessor(dir string, log logr.Logger) (*proc.Registry, error) {
	if dir == "" {
		return nil, nil
	}
	reg := proc.NewRegistry(dir)
	ended, err := reg.Sweep()
	if len(ended) > 0 {
		log.Info("ended processes a previous agent left running", "pids", ended)
	}
	if err != nil {
		return nil, fmt.Errorf("ending the processes a previous agent left running: %w", err)
	}
	return reg, nil
}

// NewGRPCServer returns a gRPC server with s registered as the
// AutomationService. opts are passed to grpc.NewServer; this is where the
// caller plugs in authentication (auth.UnaryInterceptor and
// auth.StreamInterceptor) and transport credentials.
func NewGRPCServer(s *Server, opts ...grpc.ServerOption) *grpc.Server {
	g := grpc.NewServer(opts...)
	agentpb.RegisterAutomationServiceServer(g, s)
	return g
}

// Shutdown cancels every running operation (the CLI gets SIGINT, then
// SIGKILL after the grace period) and waits until they have returned or ctx
// is done. Calls made after Shutdown fail with Cancelled.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopAll()
	done := make(chan struct{})
	go func() {
		s.running.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// begin claims the agent for one mutating call named what and returns a
// context that is cancelled when either parent or the server's shutdown is
// done, and the function that releases both.
func (s *Server) begin(parent context.Context, what string) (context.Context, func(), error) {
	if s.shutdown.Err() != nil {
		return nil, nil, agenterr.New(agenterr.Cancelled, "the agent is shutting down")
	}
	select {
	case s.busy <- what:
	default:
		return nil, nil, agenterr.New(agenterr.AgentBusy, "the agent is busy running another call; retry when it has finished")
	}
	s.running.Add(1)
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(s.shutdown, cancel)
	return ctx, func() {
		stop()
		cancel()
		<-s.busy
		s.running.Done()
	}, nil
}

// workspace returns a LocalWorkspace over the project directory that runs
// the CLI through s.cli, wrapped in a stateWorkspace. Creating one runs no
// command, so it is done per call; extra adds options such as a secrets
// provider.
func (s *Server) workspace(ctx context.Context, extra ...auto.LocalWorkspaceOption) (auto.Workspace, error) {
	opts := []auto.LocalWorkspaceOption{auto.WorkDir(s.opts.WorkDir), auto.Pulumi(s.cli)}
	if s.opts.PulumiHome != "" {
		opts = append(opts, auto.PulumiHome(s.opts.PulumiHome))
	}
	if len(s.opts.Env) > 0 {
		opts = append(opts, auto.EnvVars(s.opts.Env))
	}
	ws, err := auto.NewLocalWorkspace(ctx, append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	return &stateWorkspace{Workspace: ws}, nil
}

// projectFiles are the names the CLI accepts for the project file.
var projectFiles = []string{"Pulumi.yaml", "Pulumi.yml", "Pulumi.json"}

// requireProject fails with ProjectNotFound when the workspace has no
// project file; without this check the CLI reports the missing file in
// ways that depend on the command ("pass the fully qualified name", ...).
func (s *Server) requireProject() error {
	for _, name := range projectFiles {
		if _, err := os.Stat(filepath.Join(s.opts.WorkDir, name)); err == nil {
			return nil
		}
	}
	return agenterr.New(agenterr.ProjectNotFound, "no Pulumi.yaml project file in %s", s.opts.WorkDir)
}

// selected returns the stack chosen by SelectStack.
func (s *Server) selected() (auto.Stack, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stack == nil {
		return auto.Stack{}, agenterr.New(agenterr.NoStackSelected, "no stack is selected: call SelectStack first")
	}
	return *s.stack, nil
}

// setSelected records the stack chosen by SelectStack.
func (s *Server) setSelected(st auto.Stack) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stack = &st
}
