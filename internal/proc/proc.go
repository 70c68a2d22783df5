// Package proc handles the processes stackyard starts and must not leave
// behind: the agents the local runtime runs, and the Pulumi CLI each agent
// runs with its language hosts and resource providers.
//
// Two things make a child process hard to get rid of. If its parent is
// killed, nothing stops it: SessionAttr and GroupAttr start a child with a
// parent-death signal (Linux), in a process group of its own so that a
// terminal's Ctrl-C does not reach it twice. And the Pulumi CLI starts each
// plugin in a process group of its own, so neither killing the CLI's group
// nor walking the CLI's children after it died finds them: an orphaned
// plugin is re-parented to init.
//
// A Tree solves the second. Every process of a tree carries the tree's
// random ID in its environment (TreeEnv), which children inherit whatever
// group or session they move to, and the tree's first process leads a
// session of its own, which plugins that only change their process group
// stay in. Tree.End finds the tree's processes by either mark, scanning
// /proc, and ends them. A Registry records trees in a directory, so that
// whoever takes over after a crash (a new agent, a new operator) ends
// what a dead predecessor left running before it retries its work.
//
// Outside Linux there is no /proc to scan and no parent-death signal: the
// attributes still give a child its own group or session, but a Tree finds
// none of its processes. stackyard's agents run on Linux.
package proc

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// TreeEnv is the environment variable that marks a process as part of a
// Tree; its value is the tree's ID.
const TreeEnv = "STACKYARD_PROCESS_TREE"

// RegistryEnv is the environment variable through which the local runtime
// tells an agent the directory of its Registry.
const RegistryEnv = "STACKYARD_PROCESS_REGISTRY"

// killWait bounds how long End keeps sending SIGKILL to a tree's processes
// before it reports the ones that are still there (a process stuck in an
// uninterruptible sleep).
const killWait = 10 * time.Second

// pollInterval is how often End looks whether a tree's processes are gone.
const pollInterval = 20 * time.Millisecond

// Tree is the set of processes started, directly or not, by one command:
// the Pulumi CLI and the plugins it runs for one call. Start the command
// with Env in its environment and SessionAttr, then call Started.
type Tree struct {
	// ID is random; every process of the tree has TreeEnv=ID in its
	// environment.
	ID string `json:"id"`
	// Leader is the pid of the command, which leads a session of its own
	// (so the session's ID is Leader); 0 until Started.
	Leader int `json:"leader,omitempty"`
	// LeaderStart is when the leader started, in clock ticks since boot.
	// A process whose pid and session ID are Leader but that started at
	// another time is another session, made after the pid was reused.
	LeaderStart uint64 `json:"leaderStart,omitempty"`
}

// NewTree returns a Tree with a fresh ID and no process yet.
func NewTree() (Tree, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return Tree{}, fmt.Errorf("proc: generating a tree ID: %w", err)
	}
	return Tree{ID: hex.EncodeToString(b)}, nil
}

// Env returns the NAME=value entry that marks a process as the tree's.
func (t Tree) Env() string { return TreeEnv + "=" + t.ID }

// Started records pid, the command just started with SessionAttr, as the
// tree's leader.
func (t *Tree) Started(pid int) {
	t.Leader = pid
	if st, ok := readStat(pid); ok {
		t.LeaderStart = st.start
	}
}

// End ends every process of the tree and waits until they are gone. With
// a positive grace they get SIGTERM first and that long to exit; whatever
// is left, or everything when grace is zero, gets SIGKILL, repeated for
// processes forked in the meantime. It returns the pids it signalled, and
// an error naming the processes still running after the SIGKILLs.
func (t Tree) End(grace time.Duration) ([]int, error) {
	members := t.Members()
	if len(members) == 0 {
		return nil, nil
	}
	ended := slices.Clone(members)
	if grace > 0 {
		signalAll(members, syscall.SIGTERM)
		deadline := time.Now().Add(grace)
		for len(members) > 0 && time.Now().Before(deadline) {
			time.Sleep(pollInterval)
			members = t.Members()
		}
		if len(members) == 0 {
			return ended, nil
		}
	}
	deadline := time.Now().Add(killWait)
	for {
		members = t.Members()
		if len(members) == 0 {
			return ended, nil
		}
		for _, p := range members {
			if !slices.Contains(ended, p) {
				ended = append(ended, p)
			}
		}
		if time.Now().After(deadline) {
			return ended, fmt.Errorf("proc: processes %v of tree %s still run after SIGKILL", members, t.ID)
		}
		signalAll(members, syscall.SIGKILL)
		time.Sleep(pollInterval)
	}
}

// signalAll sends sig to every pid; a process that is already gone is no
// error.
func signalAll(pids []int, sig syscall.Signal) {
	for _, p := range pids {
		_ = syscall.Kill(p, sig)
	}
}

// Registry records trees as files in a directory, so that the trees of a
// process that died can be ended by its successor. A nil *Registry records
// nothing.
type Registry struct {
	dir string
}

// NewRegistry returns the Registry over dir, which is created on the first
// Record.
func NewRegistry(dir string) *Registry {
	return &Registry{dir: dir}
}

// recordSuffix ends the name of every record file; tempPrefix starts the
// name of one being written.
const (
	recordSuffix = ".tree.json"
	tempPrefix   = ".record-"
)

// path is where t's record lives.
func (r *Registry) path(t Tree) string {
	return filepath.Join(r.dir, t.ID+recordSuffix)
}

// Record writes (or rewrites) t's record. Write it before the command
// starts, so that no process of the tree can run unrecorded, and again
// once Started has named the leader.
func (r *Registry) Record(t Tree) error {
	if r == nil {
		return nil
	}
	if t.ID == "" || strings.ContainsAny(t.ID, `/\.`) {
		return fmt.Errorf("proc: invalid tree ID %q", t.ID)
	}
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return fmt.Errorf("proc: creating the registry: %w", err)
	}
	tmp, err := os.CreateTemp(r.dir, tempPrefix+"*")
	if err != nil {
		return fmt.Errorf("proc: recording tree %s: %w", t.ID, err)
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("proc: recording tree %s: %w", t.ID, err)
	}
	if err := os.Rename(tmp.Name(), r.path(t)); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("proc: recording tree %s: %w", t.ID, err)
	}
	return nil
}

// Forget removes t's record, once its processes are gone.
func (r *Registry) Forget(t Tree) {
	if r == nil || t.ID == "" {
		return
	}
	_ = os.Remove(r.path(t))
}

// Trees returns the recorded trees.
func (r *Registry) Trees() ([]Tree, error) {
	if r == nil {
		return nil, nil
	}
	entries, err := os.ReadDir(r.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("proc: reading the registry: %w", err)
	}
	var out []Tree
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			// Left by a Record cut short; the record it was to
			// replace, if any, is intact.
			_ = os.Remove(filepath.Join(r.dir, e.Name()))
			continue
		}
		if !strings.HasSuffix(e.Name(), recordSuffix) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(r.dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("proc: reading the registry: %w", err)
		}
		var t Tree
		if err := json.Unmarshal(b, &t); err != nil || t.ID+recordSuffix != e.Name() {
			return nil, fmt.Errorf("proc: %s is not a tree record", filepath.Join(r.dir, e.Name()))
		}
		out = append(out, t)
	}
	return out, nil
}

// Sweep ends, with SIGKILL and no grace, every process of every recorded
// tree, and forgets the trees that are gone. It is for a successor: the
// processes of a dead predecessor's trees report to no one, and must not
// go on changing anything while the successor retries. It returns the
// pids it signalled, and an error when a tree could not be read or ended
// (its record is kept, so that the next Sweep tries again).
func (r *Registry) Sweep() ([]int, error) {
	trees, err := r.Trees()
	if err != nil {
		return nil, err
	}
	var ended []int
	var errs []error
	for _, t := range trees {
		pids, err := t.End(0)
		ended = append(ended, pids...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.Forget(t)
	}
	return ended, errors.Join(errs...)
}
