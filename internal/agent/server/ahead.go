package server

import (
	"context"
	"strings"
	"sync"
	"time"
)

// A read-only command whose answer the Automation API is about to ask for
// can be started ahead, beside the command the API waits for first: after
// `pulumi up`, auto.Stack.Up reads the outputs (`pulumi stack export`, see
// stateWorkspace) and only then the summary (`pulumi stack history`); the
// two read the same finished state, so the second need not wait for the
// first. A run started ahead is taken by the Run call with the same
// working directory and arguments; one that nobody takes is cancelled when
// its operation ends (dropAhead), so its answer can never serve a later
// call.

// A command can also be answered ahead: the agent already knows what it
// would print (answer), so the Run call that asks for it runs nothing.

// aheadRun is a command started ahead and, once done is closed, its
// outcome; or, with answered set, an answer that needs no command.
type aheadRun struct {
	started  time.Time
	cancel   context.CancelFunc
	done     chan struct{}
	answered bool

	stdout, stderr string
	code           int
	err            error
}

// aheadKey identifies a command by where it runs and its arguments as the
// Automation API passes them to Run.
func aheadKey(workdir string, args []string) string {
	return workdir + "\x00" + strings.Join(args, "\x00")
}

// aheadRuns holds the commands started ahead and not yet taken.
type aheadRuns struct {
	mu   sync.Mutex
	runs map[string]*aheadRun
}

// startAhead starts args in workdir with env, under ctx, for a later Run
// with the same workdir and args to take.
func (r *cliRunner) startAhead(ctx context.Context, workdir string, env []string, args ...string) {
	ctx, cancel := context.WithCancel(ctx)
	run := &aheadRun{started: time.Now(), cancel: cancel, done: make(chan struct{})}
	r.putAhead(aheadKey(workdir, args), run)
	go func() {
		defer close(run.done)
		run.stdout, run.stderr, run.code, run.err = r.run(ctx, workdir, nil, nil, nil, env, args...)
	}()
}

// answer records stdout as the outcome of the next Run of args in workdir,
// which then starts no process.
func (r *cliRunner) answer(workdir string, args []string, stdout string) {
	run := &aheadRun{started: time.Now(), cancel: func() {}, done: make(chan struct{}), answered: true, stdout: stdout}
	close(run.done)
	r.putAhead(aheadKey(workdir, args), run)
}

// putAhead records run under key for a later Run to take, cancelling the
// one it replaces.
func (r *cliRunner) putAhead(key string, run *aheadRun) {
	r.ahead.mu.Lock()
	defer r.ahead.mu.Unlock()
	if r.ahead.runs == nil {
		r.ahead.runs = map[string]*aheadRun{}
	}
	if old := r.ahead.runs[key]; old != nil {
		old.cancel()
	}
	r.ahead.runs[key] = run
}

// takeAhead returns, and forgets, the run started ahead for workdir and
// args; nil when there is none.
func (r *cliRunner) takeAhead(workdir string, args []string) *aheadRun {
	r.ahead.mu.Lock()
	defer r.ahead.mu.Unlock()
	key := aheadKey(workdir, args)
	run := r.ahead.runs[key]
	delete(r.ahead.runs, key)
	return run
}

// dropAhead cancels every run started ahead that nobody took, and waits
// for them to end.
func (r *cliRunner) dropAhead() {
	r.ahead.mu.Lock()
	runs := r.ahead.runs
	r.ahead.runs = nil
	r.ahead.mu.Unlock()
	for _, run := range runs {
		run.cancel()
		<-run.done
		if run.answered {
			continue
		}
		r.log.V(1).Info("a command started ahead was not used", "elapsed", time.Since(run.started).Round(time.Millisecond).String())
	}
}

// historyArgs are the arguments auto.Stack.Up passes for its summary
// (Stack.History with a page size of 1 and ShowSecrets false, then the
// stack), as of the Automation API this module pins. Should they ever
// differ, the run started ahead is not taken but dropped, and the summary
// is read after the outputs as before: slower, never wrong.
func historyArgs(stack string) []string {
	return []string{"stack", "history", "--json", "--page-size", "1", "--page", "1", "--stack", stack}
}

// noHistory is `pulumi stack history --json` for a stack with no update,
// the answer given when the agent builds the summary itself.
const noHistory = "[]"
