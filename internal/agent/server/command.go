package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/blang/semver"
	"github.com/go-logr/logr"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"

	"github.com/stackyard/stackyard/internal/proc"
)

// DefaultGracePeriod is how long a cancelled CLI gets between SIGINT and
// SIGKILL when Options.GracePeriod is zero. After a SIGINT the engine stops
// starting new steps and waits for the running ones, so the period should
// cover a typical resource operation.
const DefaultGracePeriod = 30 * time.Second

// leftoverGrace is how long the processes a command left running get
// between SIGTERM and SIGKILL once it has ended.
const leftoverGrace = 5 * time.Second

// pipeDrainDelay bounds how long Run waits for the CLI's output pipes once
// the process is gone, in case a grandchild kept them open.
const pipeDrainDelay = 5 * time.Second

// cliRunner runs the Pulumi CLI for the Automation API (it implements
// auto.PulumiCommand). The Automation API's own runner (as of v3.274.1) does
// send SIGINT on context cancellation, but with a fixed 10 s delay before
// SIGKILL, to the CLI alone: the plugins the CLI started, which live in
// their own process groups, outlive it, and if the agent itself dies the
// CLI keeps running and holding the stack lock. cliRunner instead runs
// every command as a proc.Tree:
//
//   - the CLI leads a session of its own, so a Ctrl-C in the agent's
//     terminal does not reach it twice (a second SIGINT makes the engine
//     abandon running steps), and the kernel SIGKILLs it if the agent dies
//     (Linux), so an agent that is killed leaves a lock whose holder is
//     provably gone;
//   - the tree is recorded in the registry while it runs, so that the next
//     agent ends the plugins a killed one left behind before it does
//     anything else;
//   - on cancellation the CLI gets SIGINT and the grace period, then it and
//     every process of its tree get SIGKILL;
//   - whatever the command left running when it ended (a failed `pulumi
//     up` leaves its providers running) is ended too: SIGTERM, then
//     SIGKILL after leftoverGrace.
type cliRunner struct {
	path    string
	version semver.Version
	grace   time.Duration
	log     logr.Logger
	// trees records the running commands' trees; nil records none.
	trees *proc.Registry
	// ahead holds the commands started ahead of the call that will ask
	// for them (ahead.go).
	ahead aheadRuns
}

var _ auto.PulumiCommand = (*cliRunner)(nil)

// newCLIRunner finds the pulumi binary (path, or "pulumi" on PATH when empty)
// and reads its version.
func newCLIRunner(path string, grace time.Duration, log logr.Logger) (*cliRunner, error) {
	if path == "" {
		path = "pulumi"
	}
	abs, err := exec.LookPath(path)
	if err != nil {
		return nil, fmt.Errorf("pulumi CLI not found (%s): %w", path, err)
	}
	if abs, err = filepath.Abs(abs); err != nil {
		return nil, err
	}
	v, err := cliVersion(abs)
	if err != nil {
		return nil, err
	}
	if grace <= 0 {
		grace = DefaultGracePeriod
	}
	return &cliRunner{path: abs, version: v, grace: grace, log: log}, nil
}

// cliVersion returns the version of the pulumi binary at abs. Asking it
// (`pulumi version`) costs a process start on every agent start, so the
// answer is kept in the user's cache directory, keyed by the binary's path,
// size and modification time: a replaced or rebuilt binary is asked again.
// Without a usable cache directory it asks every time.
func cliVersion(abs string) (semver.Version, error) {
	cache := versionCacheFile(abs)
	if cache != "" {
		if b, err := os.ReadFile(cache); err == nil {
			if v, err := semver.ParseTolerant(strings.TrimSpace(string(b))); err == nil {
				return v, nil
			}
		}
	}
	out, err := exec.Command(abs, "version").Output()
	if err != nil {
		return semver.Version{}, fmt.Errorf("run `pulumi version`: %w", err)
	}
	text := strings.TrimSpace(string(out))
	v, err := semver.ParseTolerant(text)
	if err != nil {
		return semver.Version{}, fmt.Errorf("parse pulumi version %q: %w", text, err)
	}
	if cache != "" {
		// Best effort, written whole or not at all: a cache that cannot
		// be written only costs the next agent the same question.
		if err := os.MkdirAll(filepath.Dir(cache), 0o755); err == nil {
			if f, err := os.CreateTemp(filepath.Dir(cache), ".version-*"); err == nil {
				_, werr := f.WriteString(text + "\n")
				if cerr := f.Close(); werr == nil && cerr == nil {
					_ = os.Rename(f.Name(), cache)
				}
				_ = os.Remove(f.Name())
			}
		}
	}
	return v, nil
}

// versionCacheFile is where cliVersion keeps the version of the binary at
// abs, named by a digest of what identifies the binary's content (path,
// size, modification time); empty when there is no cache directory, the
// binary cannot be examined, or it is a script (a version manager's shim,
// which stays the same while the version behind it changes).
func versionCacheFile(abs string) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return ""
	}
	f, err := os.Open(abs)
	if err != nil {
		return ""
	}
	head := make([]byte, 2)
	_, err = io.ReadFull(f, head)
	_ = f.Close()
	if err != nil || string(head) == "#!" {
		return ""
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d", abs, fi.Size(), fi.ModTime().UnixNano()))
	return filepath.Join(dir, "stackyard", "pulumi-version", hex.EncodeToString(sum[:16]))
}

// Version returns the CLI's version.
func (r *cliRunner) Version() semver.Version { return r.version }

// Run runs the CLI with args in workdir and returns its stdout, stderr and
// exit code. It always adds --non-interactive, as the Automation API's own
// runner does, so that the CLI fails instead of prompting.
// A command started ahead with the same working directory and arguments
// (ahead.go) is not run again: Run waits for it and returns its outcome;
// one answered ahead returns that answer.
func (r *cliRunner) Run(ctx context.Context, workdir string, stdin io.Reader,
	additionalOutput, additionalErrorOutput []io.Writer, additionalEnv []string, args ...string,
) (stdout, stderr string, code int, err error) {
	started, ahead := time.Now(), false
	if run := r.takeAhead(workdir, args); run != nil && stdin == nil && len(additionalOutput) == 0 && len(additionalErrorOutput) == 0 {
		<-run.done
		if run.answered {
			r.log.V(1).Info("pulumi not run: the agent had the answer", "command", commandName(args))
			return run.stdout, run.stderr, run.code, run.err
		}
		started, ahead = run.started, true
		stdout, stderr, code, err = run.stdout, run.stderr, run.code, run.err
	} else {
		if run != nil {
			run.cancel()
			<-run.done
		}
		stdout, stderr, code, err = r.run(ctx, workdir, stdin, additionalOutput, additionalErrorOutput, additionalEnv, args...)
	}
	// Only the command's name: its arguments may carry secret config
	// values (`config set-all --secret k=v`).
	r.log.V(1).Info("ran pulumi", "command", commandName(args), "exitCode", code,
		"elapsed", time.Since(started).Round(time.Millisecond).String(), "startedAhead", ahead)
	return stdout, stderr, code, err
}

// run runs one CLI command as Run describes, as a process tree of its own.
func (r *cliRunner) run(ctx context.Context, workdir string, stdin io.Reader,
	additionalOutput, additionalErrorOutput []io.Writer, additionalEnv []string, args ...string,
) (string, string, int, error) {
	args = withNonInteractive(args)
	code := -1
	tree, err := proc.NewTree()
	if err != nil {
		return "", "", -1, err
	}
	cmd := exec.Command(r.path, args...) //nolint:gosec // the path is the configured CLI
	cmd.Dir = workdir
	cmd.Env = append(os.Environ(), additionalEnv...)
	if usesPlan(args) {
		cmd.Env = append(cmd.Env, experimentalEnv)
	}
	cmd.Env = prependPath(cmd.Env, filepath.Dir(r.path))
	cmd.Env = append(cmd.Env, tree.Env())

	var stdout, stderr bytes.Buffer
	cmd.Stdout = io.MultiWriter(append(additionalOutput, &stdout)...)
	cmd.Stderr = io.MultiWriter(append(additionalErrorOutput, &stderr)...)
	cmd.Stdin = stdin
	cmd.SysProcAttr = proc.SessionAttr()
	cmd.WaitDelay = pipeDrainDelay

	// Recorded before it starts, so that no process of the tree can run
	// unrecorded.
	if err := r.trees.Record(tree); err != nil {
		return "", "", -1, err
	}
	if err := cmd.Start(); err != nil {
		r.trees.Forget(tree)
		return "", "", -1, err
	}
	tree.Started(cmd.Process.Pid)
	if err := r.trees.Record(tree); err != nil {
		// The first record still finds the tree by its mark.
		r.log.Info("could not record the CLI's pid", "pid", cmd.Process.Pid, "error", err.Error())
	}
	defer r.reap(tree)
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	select {
	case err = <-waited:
	case <-ctx.Done():
		err = r.stop(cmd, tree, waited)
	}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		code = 0
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	}
	if ctxErr := ctx.Err(); ctxErr != nil && err != nil {
		err = fmt.Errorf("%w (%v)", ctxErr, err)
	}
	return stdout.String(), stderr.String(), code, err
}

// stop interrupts the CLI, gives it the grace period to cancel cleanly
// (the engine then finishes or cancels its running steps, writes the state
// and releases the lock), and kills it and its plugins if it is still
// running after that.
func (r *cliRunner) stop(cmd *exec.Cmd, tree proc.Tree, waited <-chan error) error {
	pid := cmd.Process.Pid
	r.log.Info("cancelling pulumi", "pid", pid, "grace", r.grace.String())
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		return <-waited
	}
	timer := time.NewTimer(r.grace)
	defer timer.Stop()
	select {
	case err := <-waited:
		return err
	case <-timer.C:
	}
	r.log.Info("pulumi did not stop within the grace period; killing it and its plugins", "pid", pid)
	// The CLI is not reaped yet, so its group is still its own.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	if _, err := tree.End(0); err != nil {
		r.log.Info("could not end the CLI's processes", "error", err.Error())
	}
	return <-waited
}

// reap ends whatever a finished command left running, and forgets its
// tree once nothing of it is left.
func (r *cliRunner) reap(tree proc.Tree) {
	ended, err := tree.End(leftoverGrace)
	if len(ended) > 0 {
		r.log.Info("ended processes the CLI left running", "pids", ended)
	}
	if err != nil {
		r.log.Error(err, "processes of the CLI survived; the next agent ends them")
		return
	}
	r.trees.Forget(tree)
}

// commandName is the CLI command args run, for the log: its leading words
// before the first flag, at most two ("up", "stack export", "config
// set-all"), never a value.
func commandName(args []string) string {
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") || len(words) == 2 {
			break
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

// withNonInteractive appends --non-interactive unless args has it.
func withNonInteractive(args []string) []string {
	for _, a := range args {
		if a == "--non-interactive" {
			return args
		}
	}
	return append(append([]string(nil), args...), "--non-interactive")
}

// prependPath puts dir first on the PATH in env (the last PATH entry, the
// one exec uses), so that the CLI finds the language hosts and plugins
// installed beside it.
func prependPath(env []string, dir string) []string {
	out := append([]string(nil), env...)
	for i := len(out) - 1; i >= 0; i-- {
		if e := out[i]; strings.HasPrefix(e, "PATH=") {
			out[i] = "PATH=" + dir + string(os.PathListSeparator) + strings.TrimPrefix(e, "PATH=")
			return out
		}
	}
	return append(out, "PATH="+dir)
}
