package local

import (
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/stackyard/stackyard/internal/agent/bind"
)

// Defaults of the warm pool (Options.WarmAgents, Options.WarmFor).
const (
	// DefaultWarmAgents is how many pre-started agents the runtime keeps
	// while agents are being started.
	DefaultWarmAgents = 2
	// DefaultWarmFor is how long the pool stays filled after the last
	// agent start: a burst keeps it warm, a quiet operator runs none.
	DefaultWarmFor = 2 * time.Minute
)

// awaitSpecFlag makes `serve` a pre-started agent, which reads its
// bind.Spec from stdin.
const awaitSpecFlag = "--await-spec"

// warmStopWait is how long a dismissed pre-started agent gets to exit on
// its own (its stdin closes empty) before its group is killed.
const warmStopWait = 2 * time.Second

// warmPool keeps pre-started agents, `serve --await-spec` with only the
// inherited environment, so that starting a Workspace's agent does not
// wait for a process to start and initialise: start binds one (its
// bind.Spec on stdin: directory, environment, token file) and the pool
// starts another in the background. The pool fills only on demand, at an
// agent start, and empties DefaultWarmFor after the last one: an operator
// restart, and an idle operator, start no agent.
//
// A pre-started agent holds no place of --max-agents until it is bound,
// serves one Workspace once bound, and is never returned to the pool.
type warmPool struct {
	r    *Runtime
	size int
	keep time.Duration
	log  logr.Logger

	mu       sync.Mutex
	work     sync.WaitGroup // fill and expire, which close waits for
	agents   []*process     // oldest first
	filling  bool
	closed   bool
	lastTake time.Time
	expiry   *time.Timer
}

// newWarmPool returns the pool of r; a size of zero or less keeps none.
func newWarmPool(r *Runtime, size int, keep time.Duration) *warmPool {
	return &warmPool{r: r, size: size, keep: keep, log: r.opts.Log.WithName("warm")}
}

// take returns a running pre-started agent, its output now logged to log,
// or nil when none is warm; either way it has the pool filled again.
func (w *warmPool) take(log logr.Logger) *process {
	if w.size <= 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.lastTake = time.Now()
	if w.expiry == nil {
		w.expiry = time.AfterFunc(w.keep, w.expire)
	}
	w.prune()
	var p *process
	if len(w.agents) > 0 {
		p, w.agents = w.agents[0], w.agents[1:]
	}
	if !w.filling {
		w.filling = true
		w.work.Add(1)
		go w.fill()
	}
	if p != nil {
		p.out.setLogger(log)
	}
	return p
}

// prune drops the pre-started agents that died before anyone took them
// (their stdin writers end with them). The caller holds w.mu.
func (w *warmPool) prune() {
	w.agents = slices.DeleteFunc(w.agents, func(p *process) bool {
		if p.running() {
			return false
		}
		p.stdin.cancel()
		return true
	})
}

// fill starts pre-started agents until the pool holds its size.
func (w *warmPool) fill() {
	defer w.work.Done()
	for {
		w.mu.Lock()
		w.prune()
		if w.closed || w.expiry == nil || len(w.agents) >= w.size {
			w.filling = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		p, err := w.start()
		w.mu.Lock()
		if err != nil {
			w.filling = false
			w.mu.Unlock()
			w.log.Error(err, "could not pre-start an agent; agents start when needed")
			return
		}
		if w.closed || w.expiry == nil {
			w.mu.Unlock()
			w.dismiss(p)
			continue
		}
		w.agents = append(w.agents, p)
		w.mu.Unlock()
	}
}

// start launches one pre-started agent. It gets only the variables the
// operator passes on (Options.InheritEnv), and works in /, until a
// bind.Spec gives it its Workspace's.
func (w *warmPool) start() (*process, error) {
	bin, args := w.r.serveCommand()
	cmd := exec.Command(bin, append(args, awaitSpecFlag, "--listen", "127.0.0.1:0")...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	var env []string
	for _, name := range w.r.opts.InheritEnv {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	p, err := w.r.launch(cmd, env, "/", w.log)
	if err != nil {
		_ = stdin.Close()
		return nil, err
	}
	p.stdin = newSpecWriter(stdin, w.log.WithValues("pid", p.pid))
	w.log.V(1).Info("pre-started an agent", "pid", p.pid)
	return p, nil
}

// expire empties the pool once no agent has started for its keep time.
func (w *warmPool) expire() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.work.Add(1)
	defer w.work.Done()
	if left := w.keep - time.Since(w.lastTake); left > 0 {
		w.expiry.Reset(left)
		w.mu.Unlock()
		return
	}
	agents := w.agents
	w.agents, w.expiry = nil, nil
	w.mu.Unlock()
	for _, p := range agents {
		w.dismiss(p)
	}
}

// close dismisses every pre-started agent, keeps the pool empty, and
// returns once no agent it started is left.
func (w *warmPool) close() {
	w.mu.Lock()
	w.closed = true
	if w.expiry != nil {
		w.expiry.Stop()
	}
	agents := w.agents
	w.agents = nil
	w.mu.Unlock()
	for _, p := range agents {
		w.dismiss(p)
	}
	w.work.Wait()
}

// dismiss ends a pre-started agent that was never bound: its stdin closes
// empty, which it takes as its cue to exit, and its group is killed if it
// does not.
func (w *warmPool) dismiss(p *process) {
	p.stopping.Store(true)
	p.stdin.cancel()
	timer := time.NewTimer(warmStopWait)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
	}
	killGroup(p)
}

// agentPIDs returns the pids of the pre-started agents in the pool.
func (w *warmPool) agentPIDs() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	var pids []int
	for _, p := range w.agents {
		if p.running() {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// specWriter hands a pre-started agent its bind.Spec: once, on its stdin,
// which it then closes.
type specWriter struct {
	spec chan bind.Spec
	once sync.Once
}

// newSpecWriter returns the writer of stdin, which waits on its own
// goroutine for bind or cancel.
func newSpecWriter(stdin io.WriteCloser, log logr.Logger) *specWriter {
	w := &specWriter{spec: make(chan bind.Spec, 1)}
	go func() {
		defer func() { _ = stdin.Close() }()
		if s, ok := <-w.spec; ok {
			// A failed write (the agent died) shows to start as an agent
			// that exits before serving; the error never holds the spec.
			if err := bind.Write(stdin, s); err != nil {
				log.Info("could not hand a pre-started agent its spec", "error", err.Error())
			}
		}
	}()
	return w
}

// bind hands the agent s.
func (w *specWriter) bind(s bind.Spec) {
	w.once.Do(func() {
		w.spec <- s
		close(w.spec)
	})
}

// cancel closes the agent's stdin without a spec.
func (w *specWriter) cancel() { w.once.Do(func() { close(w.spec) }) }
