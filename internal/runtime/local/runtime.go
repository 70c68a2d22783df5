package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/auth"
	"github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/runtime"
)

// Name is the runtime's name in logs, events and metrics.
const Name = "local"

// Defaults of Options.
const (
	// DefaultStopGracePeriod leaves a stopping agent time to interrupt a
	// running Pulumi CLI (its own grace period is 30s) and shut down.
	DefaultStopGracePeriod = 45 * time.Second
	// DefaultStartTimeout bounds an agent's start until it serves.
	DefaultStartTimeout = 30 * time.Second
	// DefaultInitTimeout bounds one fetch of a source.
	DefaultInitTimeout = 10 * time.Minute
)

// The RBAC the runtime needs, for the operator's ClusterRole: it reads the
// Secrets and ConfigMaps a Workspace's env, envFrom and git credentials
// name.
//
// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=get

// ReasonAgentNotRunning is the reason of the Waiting error Dial returns
// when the Workspace's agent is not running (idle, or not started yet).
const ReasonAgentNotRunning = "AgentNotRunning"

// Options configure a Runtime.
type Options struct {
	// Root is the directory holding every workspace's state directory.
	// Required.
	Root string
	// Client reads the Secrets and ConfigMaps a Workspace's env, envFrom
	// and git credentials refer to. Give it the manager's API reader, so
	// the operator does not cache every Secret of the cluster. Required.
	Client client.Reader
	// AgentPath is the stackyard binary run as `agent init` (and as `agent
	// serve` when there is no ServePath); empty means the running
	// executable.
	AgentPath string
	// ServePath is the lean agent binary (cmd/stackyard-agent) run as
	// `serve` for every agent start. Empty means LeanAgent beside
	// AgentPath when it is there and may be trusted as much as AgentPath
	// (see leanAgentRefused), else AgentPath's `agent serve`, which
	// serves the same API but starts slower (it initialises the
	// operator's packages too).
	ServePath string
	// PathDirs are put first on the agents' PATH: where pulumi, the
	// language hosts and the providers are.
	PathDirs []string
	// InheritEnv names the operator's environment variables the agents
	// inherit; nil means DefaultInheritEnv.
	InheritEnv []string
	// Env is added to every agent's environment, under the Workspace's own
	// env and envFrom.
	Env map[string]string
	// StopGracePeriod is how long a stopping agent gets between SIGTERM
	// and SIGKILL; zero means DefaultStopGracePeriod.
	StopGracePeriod time.Duration
	// StartTimeout bounds an agent's start, until it reports its address;
	// zero means DefaultStartTimeout.
	StartTimeout time.Duration
	// InitTimeout bounds one fetch of a source; zero means
	// DefaultInitTimeout.
	InitTimeout time.Duration
	// OnExit, when set, is called (on its own goroutine) with the
	// Workspace whose agent exited without being asked to, so that its
	// controller can reconcile it and start it again, and with a queued
	// Workspace that may now start its agent.
	OnExit func(types.NamespacedName)
	// MaxAgents bounds the agents running at once (and so the operations);
	// a Workspace that finds them all running waits its turn, first come
	// first served. Zero means unbounded; the operator's default is
	// DefaultMaxAgents.
	MaxAgents int
	// SourceCacheEntries bounds the immutable sources (a commit, an
	// artifact digest) kept for reuse by the Workspaces of a namespace
	// that deploy the same one; zero means DefaultSourceCacheEntries, a
	// negative number turns the cache off.
	SourceCacheEntries int
	// WarmAgents is how many pre-started agents the runtime keeps while
	// agents are being started, so that a Workspace's agent start binds
	// one instead of waiting for a process to start (see warmPool). Zero
	// means DefaultWarmAgents; a negative number keeps none.
	WarmAgents int
	// WarmFor is how long the pre-started agents are kept after the last
	// agent start; zero means DefaultWarmFor.
	WarmFor time.Duration
	// Log receives the runtime's log lines and, at verbosity 1, the
	// agents' output.
	Log logr.Logger
}

// Runtime runs Workspace agents as subprocesses. It implements
// runtime.Runtime, and manager.Runnable so that the manager stops every
// agent when it stops. It is safe for concurrent use.
type Runtime struct {
	opts Options

	mu     sync.Mutex
	slots  map[types.NamespacedName]*slot
	closed bool

	admit   *admission
	sources *sourceCache
	warm    *warmPool
}

// slot is the runtime's record of one Workspace.
type slot struct {
	// life serializes Ensure, Idle and Delete of the Workspace, which may
	// take long (a fetch); Dial does not wait for it.
	life sync.Mutex

	mu   sync.Mutex // guards proc
	proc *process
}

var (
	_ runtime.Runtime    = (*Runtime)(nil)
	_ runtime.Liveness   = (*Runtime)(nil)
	_ runtime.Contention = (*Runtime)(nil)
)

// New returns a Runtime over opts.Root.
func New(opts Options) (*Runtime, error) {
	if opts.Root == "" || opts.Client == nil {
		return nil, errors.New("local runtime: Root and Client are required")
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, err
	}
	opts.Root = root
	if opts.AgentPath == "" {
		if opts.AgentPath, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("local runtime: finding the stackyard binary: %w", err)
		}
	}
	// Absolute, so that the lean agent is looked up beside the binary that
	// runs, not in the working directory.
	if !strings.ContainsRune(opts.AgentPath, filepath.Separator) {
		if opts.AgentPath, err = exec.LookPath(opts.AgentPath); err != nil {
			return nil, fmt.Errorf("local runtime: %w", err)
		}
	}
	if opts.AgentPath, err = filepath.Abs(opts.AgentPath); err != nil {
		return nil, fmt.Errorf("local runtime: %w", err)
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	if opts.ServePath == "" {
		lean := filepath.Join(filepath.Dir(opts.AgentPath), LeanAgent)
		if why := leanAgentRefused(opts.AgentPath, lean); why != "" {
			opts.Log.Info("agents start as `stackyard agent serve`", "leanAgent", lean, "notUsed", why)
		} else {
			opts.ServePath = lean
			opts.Log.Info("agents start as `stackyard-agent serve`", "leanAgent", lean)
		}
	}
	if opts.InheritEnv == nil {
		opts.InheritEnv = DefaultInheritEnv
	}
	if opts.StopGracePeriod <= 0 {
		opts.StopGracePeriod = DefaultStopGracePeriod
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.InitTimeout <= 0 {
		opts.InitTimeout = DefaultInitTimeout
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	if opts.SourceCacheEntries == 0 {
		opts.SourceCacheEntries = DefaultSourceCacheEntries
	}
	if opts.WarmAgents == 0 {
		opts.WarmAgents = DefaultWarmAgents
	}
	if opts.WarmFor <= 0 {
		opts.WarmFor = DefaultWarmFor
	}
	r := &Runtime{opts: opts, slots: map[types.NamespacedName]*slot{}, admit: newAdmission(opts.MaxAgents, opts.OnExit),
		sources: &sourceCache{dir: filepath.Join(root, sourceCacheDir), max: opts.SourceCacheEntries}}
	r.warm = newWarmPool(r, opts.WarmAgents, opts.WarmFor)
	return r, nil
}

// Collector reports how many agents run and how many wait for a place
// (stackyard_local_agents).
func (r *Runtime) Collector() prometheus.Collector { return agentsCollector{r.admit} }

// Queued is how many Workspaces wait for a place to start their agent;
// while some do, the Workspace controller idles unused agents at once
// (runtime.Contention).
func (r *Runtime) Queued() int {
	_, queued := r.admit.counts()
	return queued
}

// Name returns "local".
func (r *Runtime) Name() string { return Name }

// StateDir returns the state directory of the Workspace namespace/name.
func (r *Runtime) StateDir(namespace, name string) string {
	return filepath.Join(r.opts.Root, namespace, name)
}

// slot returns the record of key, creating it; it fails once the runtime
// is closed.
func (r *Runtime) slot(key types.NamespacedName) (*slot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("local runtime: stopped")
	}
	s := r.slots[key]
	if s == nil {
		s = &slot{}
		r.slots[key] = s
	}
	return s, nil
}

// current returns the slot's live process, or nil.
func (s *slot) current() *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil && s.proc.running() {
		return s.proc
	}
	return nil
}

// take removes and returns the slot's process (live or not).
func (s *slot) take() *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	s.proc = nil
	return p
}

// Ensure fetches ws's source if needed and keeps its agent running with
// its current settings; see the package doc.
func (r *Runtime) Ensure(ctx context.Context, ws *autov1alpha1.Workspace) (runtime.Status, error) {
	key := types.NamespacedName{Namespace: ws.Namespace, Name: ws.Name}
	s, err := r.slot(key)
	if err != nil {
		return runtime.Status{}, err
	}
	s.life.Lock()
	defer s.life.Unlock()
	status, err := r.ensure(ctx, ws, key, s)
	if err != nil && s.current() == nil {
		// A Workspace whose agent cannot start does not keep a place
		// others wait for; it queues again when it retries.
		r.admit.release(key)
	}
	return status, err
}

// ensure is Ensure with the slot's life held.
func (r *Runtime) ensure(ctx context.Context, ws *autov1alpha1.Workspace, key types.NamespacedName, s *slot) (runtime.Status, error) {
	log := r.opts.Log.WithValues("workspace", key.String())

	src, err := runtime.SourceOf(ws)
	if err != nil {
		return runtime.Status{}, err
	}
	if !r.admit.acquire(key) {
		// The same words for the whole wait: a position in line would
		// change for every waiting Workspace each time one gets a place,
		// a status write for each (the metric stackyard_local_agents
		// counts the line).
		return runtime.Status{Queued: true, Message: fmt.Sprintf("queued: %d agents run, the most at once (--max-agents); first come, first served",
			r.opts.MaxAgents)}, nil
	}
	dir := r.StateDir(ws.Namespace, ws.Name)
	if err := os.MkdirAll(filepath.Join(dir, homeDir), 0o700); err != nil {
		return runtime.Status{}, reconcile.NewGeneric("", err)
	}
	env, err := r.environment(ctx, ws, dir)
	if err != nil {
		return runtime.Status{}, err
	}
	if s.current() == nil {
		reapOrphan(dir, log)
	}
	if m := readMarker(dir); m == nil || m.Fingerprint != src.Fingerprint() {
		// The running agent serves a source that is about to be replaced.
		if p := s.take(); p != nil {
			r.stop(p, log)
		}
	}
	m, err := r.prepareSource(ctx, ws, src, dir, env)
	if err != nil {
		return runtime.Status{}, err
	}
	projectDir := src.ProjectDir(filepath.Join(dir, sourceDir))
	verbose := ws.Spec.PulumiLogLevel > 0
	launch := digest(append([]string{r.opts.AgentPath, projectDir, m.Instance, fmt.Sprint(verbose)}, env...))
	status := runtime.Status{Revision: m.Revision, Instance: digest([]string{m.Instance, launch})}

	if p := s.current(); p != nil && p.launch == launch {
		status.Ready, status.Address = true, p.addr
		return status, nil
	}
	if p := s.take(); p != nil {
		log.Info("restarting the agent: its settings changed or it exited", "pid", p.pid)
		r.stop(p, log)
	}
	p, err := r.start(ctx, startSpec{dir: dir, projectDir: projectDir, env: env, launch: launch, verbose: verbose, onExit: r.exitNotifier(key)}, log)
	if err != nil {
		return runtime.Status{}, reconcile.NewGeneric("", err)
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	status.Ready, status.Address = true, p.addr
	return status, nil
}

// exitNotifier returns the callback a process runs when it exits unasked.
func (r *Runtime) exitNotifier(key types.NamespacedName) func(error) {
	if r.opts.OnExit == nil {
		return nil
	}
	return func(error) { go r.opts.OnExit(key) }
}

// Idle stops ws's agent; its state directory stays for the next Ensure.
func (r *Runtime) Idle(_ context.Context, ws *autov1alpha1.Workspace) error {
	s, err := r.slot(types.NamespacedName{Namespace: ws.Namespace, Name: ws.Name})
	if err != nil {
		return err
	}
	s.life.Lock()
	defer s.life.Unlock()
	r.idle(s, ws)
	return nil
}

// idle stops the slot's agent, and any orphan serving its directory;
// s.life is held.
func (r *Runtime) idle(s *slot, ws *autov1alpha1.Workspace) {
	log := r.opts.Log.WithValues("workspace", ws.Namespace+"/"+ws.Name)
	if p := s.take(); p != nil {
		r.stop(p, log)
	}
	reapOrphan(r.StateDir(ws.Namespace, ws.Name), log)
	r.admit.release(types.NamespacedName{Namespace: ws.Namespace, Name: ws.Name})
}

// Delete stops ws's agent and removes its state directory.
func (r *Runtime) Delete(_ context.Context, ws *autov1alpha1.Workspace) error {
	s, err := r.slot(types.NamespacedName{Namespace: ws.Namespace, Name: ws.Name})
	if err != nil {
		return err
	}
	s.life.Lock()
	defer s.life.Unlock()
	r.idle(s, ws)
	if err := os.RemoveAll(r.StateDir(ws.Namespace, ws.Name)); err != nil {
		return reconcile.NewGeneric("", fmt.Errorf("removing the state directory: %w", err))
	}
	// The namespace's directory goes with its last workspace.
	_ = os.Remove(filepath.Join(r.opts.Root, ws.Namespace))
	return nil
}

// Dial connects to ws's running agent over loopback with its token. When
// no agent runs it returns a reconcile.Waiting error (reason
// ReasonAgentNotRunning): the Workspace controller starts it on demand.
func (r *Runtime) Dial(_ context.Context, ws *autov1alpha1.Workspace) (*grpc.ClientConn, error) {
	s, err := r.slot(types.NamespacedName{Namespace: ws.Namespace, Name: ws.Name})
	if err != nil {
		return nil, err
	}
	p := s.current()
	if p == nil {
		return nil, reconcile.NewWaiting(ReasonAgentNotRunning, errNotRunning, 0)
	}
	return grpc.NewClient(p.addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.BearerToken(p.token)))
}

// Running reports whether this runtime runs the agent ws's status names:
// after an operator restart that status names a process that is gone.
func (r *Runtime) Running(ws *autov1alpha1.Workspace) bool {
	s, err := r.slot(types.NamespacedName{Namespace: ws.Namespace, Name: ws.Name})
	if err != nil {
		return false
	}
	p := s.current()
	return p != nil && p.addr == ws.Status.Address
}

// PID returns the pid of ws's running agent, or 0; for tests and
// diagnostics.
func (r *Runtime) PID(namespace, name string) int {
	s, err := r.slot(types.NamespacedName{Namespace: namespace, Name: name})
	if err != nil {
		return 0
	}
	if p := s.current(); p != nil {
		return p.pid
	}
	return 0
}

// WarmPIDs returns the pids of the pre-started agents waiting to be
// bound; for tests and diagnostics.
func (r *Runtime) WarmPIDs() []int { return r.warm.agentPIDs() }

// Start waits for ctx to end and then stops every agent; it makes the
// Runtime a manager.Runnable, so the agents stop with the manager.
func (r *Runtime) Start(ctx context.Context) error {
	<-ctx.Done()
	r.Close()
	return nil
}

// NeedLeaderElection reports false: agents must stop with the manager
// whether or not it leads.
func (r *Runtime) NeedLeaderElection() bool { return false }

// Close stops every agent, in parallel, and refuses further calls.
func (r *Runtime) Close() {
	r.warm.close()
	r.mu.Lock()
	r.closed = true
	slots := make(map[types.NamespacedName]*slot, len(r.slots))
	for k, v := range r.slots {
		slots[k] = v
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for key, s := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.life.Lock()
			defer s.life.Unlock()
			if p := s.take(); p != nil {
				r.stop(p, r.opts.Log.WithValues("workspace", key.String()))
			}
		}()
	}
	wg.Wait()
}

// digest is a short hex SHA-256 of the parts, for comparing settings
// without keeping (secret) values around.
func digest(parts []string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
