package update

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Causes with which a running operation is cancelled; the outcome tells
// them apart to pick its reason.
var (
	// errShutdown cancels every operation when the manager stops.
	errShutdown = errors.New("the operator is shutting down")
	// errDeleted cancels the operation of an Update being deleted.
	errDeleted = errors.New("the Update is being deleted")
)

// timedOut cancels an operation that ran past Options.OperationTimeout.
type timedOut struct{ after time.Duration }

func (e timedOut) Error() string {
	return fmt.Sprintf("the operation ran longer than the operation timeout (%s) and was cancelled", e.after)
}

// run is one Update's operation running in its own goroutine. Its outcome
// is set once, before done is closed, and read by the reconcile that writes
// it to the Update's status.
type run struct {
	// key and uid identify the Update the operation belongs to.
	key types.NamespacedName
	uid types.UID
	// workspace is the Workspace whose agent runs the operation; a
	// workspace runs one operation of this operator at a time.
	workspace types.NamespacedName

	cancel  context.CancelCauseFunc
	done    chan struct{}
	outcome *outcome
}

// finished reports whether the operation has ended and its outcome is set.
func (r *run) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// runners tracks the operations running in this process: at most one per
// Update and one per Workspace. A run stays registered from the moment its
// Update is claimed until its outcome has been written, so that a reconcile
// can tell "running here" from "interrupted" without asking anyone else.
//
// runners is a manager Runnable: when the manager stops, it cancels every
// operation (the agent then interrupts the Pulumi CLI gracefully) and waits
// briefly for the goroutines to return. Their outcomes are not written, as
// the controllers have stopped; the next operator process finds those
// Updates Progressing with no run and marks them Interrupted.
type runners struct {
	mu          sync.Mutex
	byKey       map[types.NamespacedName]*run
	byWorkspace map[types.NamespacedName]*run
	stopped     bool
	wg          sync.WaitGroup

	// finished is called, outside the lock, when a run's outcome is set.
	finished func(*run)
	// shutdownTimeout bounds how long Start waits for the runs at shutdown.
	shutdownTimeout time.Duration
}

func newRunners(shutdownTimeout time.Duration, finished func(*run)) *runners {
	return &runners{
		byKey:           map[types.NamespacedName]*run{},
		byWorkspace:     map[types.NamespacedName]*run{},
		finished:        finished,
		shutdownTimeout: shutdownTimeout,
	}
}

// get returns the run registered for the Update key, or nil.
func (rs *runners) get(key types.NamespacedName) *run {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.byKey[key]
}

// reserve registers a run for the Update key in workspace, not started yet.
// It fails when the Update or the workspace already has one, returning the
// run in the way, or when the registry has stopped (nil).
func (rs *runners) reserve(key types.NamespacedName, uid types.UID, workspace types.NamespacedName) (*run, *run, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.stopped {
		return nil, nil, false
	}
	if other := rs.byKey[key]; other != nil {
		return nil, other, false
	}
	if other := rs.byWorkspace[workspace]; other != nil {
		return nil, other, false
	}
	r := &run{key: key, uid: uid, workspace: workspace, done: make(chan struct{})}
	rs.byKey[key] = r
	rs.byWorkspace[workspace] = r
	return r, nil, true
}

// remove unregisters r, freeing its Update and its workspace.
func (rs *runners) remove(r *run) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.byKey[r.key] == r {
		delete(rs.byKey, r.key)
	}
	if rs.byWorkspace[r.workspace] == r {
		delete(rs.byWorkspace, r.workspace)
	}
}

// start runs op for the reserved r in a new goroutine, with a context that
// cancel (with a cause) or the registry's shutdown ends. op's outcome is
// stored in r before done is closed.
func (rs *runners) start(r *run, op func(ctx context.Context) *outcome) {
	ctx, cancel := context.WithCancelCause(context.Background())
	rs.mu.Lock()
	r.cancel = cancel
	stopped := rs.stopped
	rs.wg.Add(1)
	rs.mu.Unlock()
	if stopped {
		cancel(errShutdown)
	}
	go func() {
		defer rs.wg.Done()
		defer cancel(nil)
		r.outcome = op(ctx)
		close(r.done)
		if rs.finished != nil {
			rs.finished(r)
		}
	}()
}

// cancelRun cancels r's operation with cause; a run not started yet, or
// already finished, is left alone.
func (rs *runners) cancelRun(r *run, cause error) {
	rs.mu.Lock()
	cancel := r.cancel
	rs.mu.Unlock()
	if cancel != nil {
		cancel(cause)
	}
}

// Start waits until ctx is done (the manager is stopping), then cancels
// every running operation and waits up to the shutdown timeout for their
// goroutines to return.
func (rs *runners) Start(ctx context.Context) error {
	<-ctx.Done()
	rs.mu.Lock()
	rs.stopped = true
	for _, r := range rs.byKey {
		if r.cancel != nil {
			r.cancel(errShutdown)
		}
	}
	rs.mu.Unlock()
	done := make(chan struct{})
	go func() {
		rs.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(rs.shutdownTimeout):
	}
	return nil
}

// NeedLeaderElection reports true: runs exist only where the controllers
// run, so the registry starts and stops with them.
func (rs *runners) NeedLeaderElection() bool { return true }
