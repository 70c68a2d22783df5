package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"github.com/stackyard/stackyard/internal/agent/auth"
	"github.com/stackyard/stackyard/internal/agent/bind"
	"github.com/stackyard/stackyard/internal/proc"
)

// process is one running agent (`stackyard-agent serve`, or `stackyard
// agent serve`).
type process struct {
	pid     int
	addr    string
	token   string
	launch  string // digest of what it was started with
	dir     string // the workspace's state directory
	done    chan struct{}
	exitErr error // set before done is closed

	stopping atomic.Bool // set when the runtime asked it to stop
	out      *agentOutput
	stdin    *specWriter // a pre-started agent's; nil for one started bound

	mu     sync.Mutex
	onExit func(error) // called when it exits unasked
}

// setOnExit sets what the process calls when it exits unasked.
func (p *process) setOnExit(f func(error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onExit = f
}

// exitHook is what setOnExit set, or nil.
func (p *process) exitHook() func(error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.onExit
}

// running reports whether the process has not exited.
func (p *process) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// startSpec is what start needs to launch an agent.
type startSpec struct {
	dir        string // state directory
	projectDir string
	env        []string
	launch     string
	verbose    bool // the agent logs more (spec.pulumiLogLevel > 0)
	onExit     func(error)
}

// start ends what an earlier agent over the state directory left running,
// binds a pre-started agent to the Workspace (see warmPool), or launches
// one when none is warm, and waits until it prints its address. The token
// is fresh for every process and written where only the operator's user
// can read it.
func (r *Runtime) start(ctx context.Context, s startSpec, log logr.Logger) (*process, error) {
	// What a previous agent over dir left running must be gone before a
	// new one can retry its work.
	if err := sweep(s.dir, log); err != nil {
		return nil, err
	}
	token, err := auth.GenerateToken()
	if err != nil {
		return nil, err
	}
	tf := filepath.Join(s.dir, tokenFile)
	if err := os.WriteFile(tf, []byte(token), 0o600); err != nil {
		return nil, fmt.Errorf("writing the agent token: %w", err)
	}
	spec := bind.Spec{Dir: s.dir, Workspace: s.projectDir, TokenFile: tf, Verbose: s.verbose,
		Env: append(slices.Clip(s.env), proc.RegistryEnv+"="+filepath.Join(s.dir, processesDir))}
	// Checked before either path, so that a value no process can be given
	// fails the same way, naming its variable, cold or warm.
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	p := r.warm.take(log)
	if p == nil {
		bin, args := r.serveCommand()
		args = append(args, "--workspace", spec.Workspace, "--listen", "127.0.0.1:0", "--token-file", spec.TokenFile)
		if spec.Verbose {
			args = append(args, "--verbose")
		}
		if p, err = r.launch(exec.Command(bin, args...), spec.Env, s.dir, log); err != nil {
			return nil, err
		}
	}
	p.token, p.launch, p.dir = token, s.launch, s.dir
	p.setOnExit(s.onExit)
	if p.stdin != nil { // pre-started: bound only now that it reports its exit
		log.V(1).Info("binding a pre-started agent", "pid", p.pid)
		p.stdin.bind(spec)
	}
	_ = os.WriteFile(filepath.Join(s.dir, pidFile), []byte(strconv.Itoa(p.pid)), 0o644)

	timer := time.NewTimer(r.opts.StartTimeout)
	defer timer.Stop()
	select {
	case addr := <-p.out.address:
		p.addr = addr
		log.V(1).Info("agent started", "pid", p.pid, "address", addr)
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("the agent exited before serving (%v): %s", p.exitErr, p.out.tail())
	case <-timer.C:
		r.stop(p, log)
		return nil, fmt.Errorf("the agent did not report its address within %s: %s", r.opts.StartTimeout, p.out.tail())
	case <-ctx.Done():
		r.stop(p, log)
		return nil, ctx.Err()
	}
}

// launch starts cmd, an agent, with env in dir, in its own process group
// that dies with the operator, its output logged to log, and watches for
// its exit.
func (r *Runtime) launch(cmd *exec.Cmd, env []string, dir string, log logr.Logger) (*process, error) {
	cmd.Env = env
	cmd.Dir = dir
	cmd.SysProcAttr = proc.GroupAttr() // its own group, and dies with the operator
	out := newAgentOutput(log)
	cmd.Stdout = out.stdout()
	cmd.Stderr = out.stderr()
	// Grandchildren holding the pipes must not keep Wait from returning.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the agent %s: %w", cmd.Path, err)
	}
	p := &process{pid: cmd.Process.Pid, done: make(chan struct{}), out: out}
	go func() {
		err := cmd.Wait()
		p.exitErr = err
		close(p.done)
		if !p.stopping.Load() {
			log := out.logger()
			log.Info("agent exited unexpectedly", "pid", p.pid, "error", errString(err), "stderr", out.tail())
			if onExit := p.exitHook(); onExit != nil {
				onExit(err)
			}
		}
	}()
	return p, nil
}

// serveCommand is the binary and the leading arguments of an agent start:
// the lean agent's `serve`, or `stackyard agent serve`.
func (r *Runtime) serveCommand() (string, []string) {
	if r.opts.ServePath != "" {
		return r.opts.ServePath, []string{"serve"}
	}
	return r.opts.AgentPath, []string{"agent", "serve"}
}

// stop asks the agent to stop (SIGTERM: it cancels running operations and
// shuts down), and kills its process group after the grace period.
func (r *Runtime) stop(p *process, log logr.Logger) {
	p.stopping.Store(true)
	if p.running() {
		_ = syscall.Kill(p.pid, syscall.SIGTERM)
		timer := time.NewTimer(r.opts.StopGracePeriod)
		select {
		case <-p.done:
		case <-timer.C:
			log.Info("agent did not stop in time; killing it", "pid", p.pid, "grace", r.opts.StopGracePeriod)
		}
		timer.Stop()
	}
	killGroup(p)
	if p.dir == "" {
		return // a pre-started agent never bound: it ran nothing
	}
	// A killed agent's CLI dies with it; the providers it ran may not.
	_ = sweep(p.dir, log)
	removeIfPid(filepath.Join(p.dir, pidFile), p.pid)
	_ = os.Remove(filepath.Join(p.dir, tokenFile))
	log.V(1).Info("agent stopped", "pid", p.pid)
}

// killGroup kills whatever is left in p's group (the agent, or anything
// it started in the group) and waits until the agent has been reaped.
func killGroup(p *process) {
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	<-p.done
}

// reapOrphan kills an agent recorded in dir's pid file that this runtime
// did not start (left by a previous operator in the same process, or one
// whose parent-death signal could not fire) but that still serves dir,
// and then the processes its CLI runs left.
func reapOrphan(dir string, log logr.Logger) {
	if b, err := os.ReadFile(filepath.Join(dir, pidFile)); err == nil {
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err == nil && proc.Alive(pid) && servesDir(pid, dir) {
			log.Info("stopping an orphaned agent", "pid", pid)
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			for i := 0; i < 100 && proc.Alive(pid); i++ {
				time.Sleep(20 * time.Millisecond)
			}
		}
		_ = os.Remove(filepath.Join(dir, pidFile))
	}
	_ = sweep(dir, log)
}

// processesDir, in a state directory, is the agent's proc.Registry: the
// process trees of the CLI runs in progress.
const processesDir = "processes"

// sweep ends the processes of the trees recorded in dir's registry: those
// an agent that was killed (alone, or with the operator) left running,
// providers in the middle of a resource operation among them.
func sweep(dir string, log logr.Logger) error {
	ended, err := proc.NewRegistry(filepath.Join(dir, processesDir)).Sweep()
	if len(ended) > 0 {
		log.Info("ended processes a dead agent left running", "pids", ended)
	}
	if err != nil {
		log.Error(err, "could not end the processes a dead agent left running")
		return fmt.Errorf("ending the processes a previous agent left running: %w", err)
	}
	return nil
}

// servesDir reports whether pid is an agent started for the state
// directory dir: its command line names dir's token file, or it is a
// pre-started agent (`serve --await-spec`) bound to dir, its working
// directory. It guards against killing an unrelated process that reused a
// recorded pid.
func servesDir(pid int, dir string) bool {
	args := proc.Cmdline(pid)
	if slices.Contains(args, filepath.Join(dir, tokenFile)) {
		return true
	}
	if !slices.Contains(args, awaitSpecFlag) {
		return false
	}
	// The kernel gives the working directory with symlinks resolved; dir
	// may hold one (a Root under a linked /home).
	cwd := proc.Cwd(pid)
	if cwd == "" {
		return false
	}
	a, errA := os.Stat(cwd)
	b, errB := os.Stat(dir)
	return errA == nil && errB == nil && os.SameFile(a, b)
}

// removeIfPid removes the pid file when it still names pid.
func removeIfPid(path string, pid int) {
	if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(pid) {
		_ = os.Remove(path)
	}
}

// errString is err's text, or "" for nil.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// agentOutput receives an agent's stdout and stderr. The first stdout line
// is its address; everything after, and all of stderr, is logged line by
// line at verbosity 1 (the agent keeps secrets out of its output) and the
// last lines are kept to explain a failed start.
type agentOutput struct {
	log     logr.Logger
	address chan string

	mu      sync.Mutex
	gotAddr bool
	partial [2]bytes.Buffer
	lines   []string
}

// tailLines is how many lines of output a failure message quotes.
const tailLines = 5

// logger is the logger output goes to.
func (o *agentOutput) logger() logr.Logger {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.log
}

// setLogger sends further output to log: a pre-started agent's, once it
// is bound to a Workspace.
func (o *agentOutput) setLogger(log logr.Logger) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.log = log
}

func newAgentOutput(log logr.Logger) *agentOutput {
	return &agentOutput{log: log, address: make(chan string, 1)}
}

// streamWriter writes one of the agent's streams into its agentOutput.
type streamWriter struct {
	o      *agentOutput
	stream int // 0 stdout, 1 stderr
}

func (o *agentOutput) stdout() *streamWriter { return &streamWriter{o: o, stream: 0} }
func (o *agentOutput) stderr() *streamWriter { return &streamWriter{o: o, stream: 1} }

// Write splits p into lines and hands each to line.
func (w *streamWriter) Write(p []byte) (int, error) {
	o := w.o
	o.mu.Lock()
	defer o.mu.Unlock()
	buf := &o.partial[w.stream]
	buf.Write(p)
	for {
		line, err := buf.ReadString('\n')
		if err != nil {
			// An incomplete line stays for the next write.
			rest := line
			buf.Reset()
			buf.WriteString(rest)
			return len(p), nil
		}
		o.line(w.stream, strings.TrimRight(line, "\r\n"))
	}
}

// line handles one complete line; o.mu is held.
func (o *agentOutput) line(stream int, text string) {
	if stream == 0 && !o.gotAddr {
		o.gotAddr = true
		o.address <- strings.TrimSpace(text)
		return
	}
	if text == "" {
		return
	}
	o.log.V(1).Info(text, "stream", [2]string{"stdout", "stderr"}[stream])
	o.lines = append(o.lines, text)
	if len(o.lines) > tailLines {
		o.lines = o.lines[len(o.lines)-tailLines:]
	}
}

// tail returns the last lines of output, for error messages.
func (o *agentOutput) tail() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.lines) == 0 {
		return "(no output)"
	}
	return strings.Join(o.lines, " | ")
}

// errNotRunning says Dial found no agent.
var errNotRunning = errors.New("the workspace's agent is not running")
