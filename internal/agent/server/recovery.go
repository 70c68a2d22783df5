package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/internal/proc"
)

// lockedText is how the CLI's self-managed backend reports a lock.
const lockedText = "the stack is currently locked by"

// clearPendingMethod names how the agent clears pending operations, for
// Recovery.Method.
const clearPendingMethod = "refresh --clear-pending-creates"

// startTolerance absorbs the imprecision of comparing a process's start
// time (known to a second, through the boot time) with a lock's timestamp
// (to a second when read from the CLI's message).
const startTolerance = 2 * time.Second

// lockLine matches one lock in the CLI's message:
//
//	<url>: created by <user>@<host> (pid <pid>) at <RFC 3339 time>
var lockLine = regexp.MustCompile(`(?m)^\s*(\S+): created by (.*)@(\S+) \(pid (-?\d+)\) at (\S+)\s*$`)

// stackLock is one lock on a stack as the CLI describes it.
type stackLock struct {
	url       string
	pid       int
	username  string
	hostname  string
	timestamp time.Time
}

// lockFile is the content of a self-managed backend's lock file.
type lockFile struct {
	Pid       int       `json:"pid"`
	Username  string    `json:"username"`
	Hostname  string    `json:"hostname"`
	Timestamp time.Time `json:"timestamp"`
}

// parseLocks reads the locks listed in a "stack is currently locked" error.
// For a file:// backend it reads each lock file too, for the full-precision
// timestamp.
func parseLocks(text string) []stackLock {
	var out []stackLock
	for _, m := range lockLine.FindAllStringSubmatch(stripANSI(text), -1) {
		pid, err := strconv.Atoi(m[4])
		if err != nil {
			continue
		}
		l := stackLock{url: m[1], username: m[2], hostname: m[3], pid: pid}
		l.timestamp, _ = time.Parse(time.RFC3339, m[5])
		if u, err := url.Parse(l.url); err == nil && u.Scheme == "file" {
			if b, err := os.ReadFile(u.Path); err == nil {
				var f lockFile
				if json.Unmarshal(b, &f) == nil && f.Pid == l.pid && !f.Timestamp.IsZero() {
					l.timestamp = f.Timestamp
				}
			}
		}
		out = append(out, l)
	}
	return out
}

// holderGone decides whether the process that took l is provably gone:
// it must have run on this host (the CLI records os.Hostname, which in a
// pod is the pod name), and its pid must either not be running or belong
// to a process that started after the lock was taken (the pid was reused,
// as after a container restart). Anything else, including a lock from
// another host, is treated as held.
func holderGone(l stackLock, hostname string) (bool, string) {
	if l.hostname != hostname {
		return false, fmt.Sprintf("held on host %q, not this one (%q)", l.hostname, hostname)
	}
	if !proc.Alive(l.pid) {
		return true, fmt.Sprintf("process %d is not running", l.pid)
	}
	if l.timestamp.IsZero() {
		return false, fmt.Sprintf("process %d is running", l.pid)
	}
	if start, ok := proc.StartTime(l.pid); ok && start.After(l.timestamp.Add(startTolerance)) {
		return true, fmt.Sprintf("pid %d now belongs to a process started after the lock was taken", l.pid)
	}
	return false, fmt.Sprintf("process %d is running", l.pid)
}

// isLockError reports whether err says the stack is locked.
func isLockError(err error) bool {
	return err != nil && strings.Contains(err.Error(), lockedText)
}

// clearStaleLocks removes the locks that err reports, with `pulumi cancel`,
// if and only if every holder is provably gone; `pulumi cancel` removes all
// of a stack's locks, so one live holder keeps them all. Otherwise it
// returns a StackLocked error describing the holders.
func (s *Server) clearStaleLocks(ctx context.Context, st auto.Stack, err error) ([]*agentpb.StackLock, error) {
	locks := parseLocks(err.Error())
	if len(locks) == 0 {
		return nil, agenterr.New(agenterr.StackLocked, "the stack is locked and the lock could not be read: %s",
			s.fail(ctx, err, nil).Message)
	}
	hostname, herr := os.Hostname()
	if herr != nil {
		return nil, agenterr.New(agenterr.StackLocked, "the stack is locked and this host's name is unknown: %v", herr)
	}
	var cleared []*agentpb.StackLock
	for _, l := range locks {
		gone, why := holderGone(l, hostname)
		if !gone {
			return nil, agenterr.New(agenterr.StackLocked, "the stack is locked by %s@%s (pid %d) since %s: %s",
				l.username, l.hostname, l.pid, l.timestamp.Format(time.RFC3339), why).
				With("holder", fmt.Sprintf("%s@%s", l.username, l.hostname)).
				With("pid", strconv.Itoa(l.pid))
		}
		cleared = append(cleared, &agentpb.StackLock{
			Pid:       int32(l.pid), //nolint:gosec // pids fit
			Username:  l.username,
			Hostname:  l.hostname,
			Timestamp: timestamppb.New(l.timestamp),
			Why:       why,
		})
	}
	s.log.Info("clearing stale stack locks", "stack", st.Name(), "locks", len(cleared))
	// `pulumi cancel`, as auto.Stack.Cancel runs it; that works only on a
	// bare LocalWorkspace, and the agent's wraps one (stateWorkspace).
	if _, cerr := runCLI(ctx, st.Workspace(), "failed to cancel update", "cancel", "--yes", "--stack", st.Name()); cerr != nil {
		return nil, s.fail(ctx, cerr, nil)
	}
	return cleared, nil
}

// withLockRecovery runs attempt; if it fails because of a lock whose holder
// is provably gone, it clears the lock, records that in log and runs
// attempt once more.
func (s *Server) withLockRecovery(ctx context.Context, st auto.Stack, log *repairLog, attempt func() error) error {
	err := attempt()
	if !isLockError(err) || ctx.Err() != nil {
		return err
	}
	cleared, cerr := s.clearStaleLocks(ctx, st, err)
	if cerr != nil {
		return cerr
	}
	log.locksCleared(cleared)
	return attempt()
}

// pendingOperations lists the operations an interrupted run left in the
// stack's state, read with `pulumi stack export` (which takes no lock, and
// needs no secrets provider without --show-secrets).
func (s *Server) pendingOperations(ctx context.Context, st auto.Stack) ([]*agentpb.PendingOperation, error) {
	dep, err := exportState(ctx, st.Workspace(), st.Name())
	if err != nil {
		return nil, err
	}
	return pendingOf(dep)
}

// clearPending removes pending operations with the engine's own mechanism,
// `pulumi refresh --clear-pending-creates`: it drops pending creates, and
// the snapshot the refresh writes keeps no other pending operation either.
// It also brings the state in line with the resources, which is what an
// interrupted run needs before the next update.
func (s *Server) clearPending(ctx context.Context, st auto.Stack, log *repairLog, pending []*agentpb.PendingOperation) error {
	s.log.Info("clearing pending operations", "stack", st.Name(), "count", len(pending))
	log.clearing(pending, clearPendingMethod)
	err := s.withLockRecovery(ctx, st, log, func() error {
		_, err := st.Refresh(ctx,
			optrefresh.ClearPendingCreates(),
			optrefresh.Message("stackyard: clear pending operations of an interrupted run"),
			optrefresh.ShowSecrets(false),
			optrefresh.SuppressOutputs())
		return err
	})
	if err != nil {
		return err
	}
	log.pendingCleared()
	return nil
}

// repairLog is what the agent repaired before an operation (rec), and
// how it tells the caller: each repair is sent (the whole Recovery, each
// time it changes) as it begins and as it ends, so that a caller whose
// stream breaks before the Result, even in the middle of a repair (an
// agent killed, a connection lost), still learns what was repaired or
// was being repaired. A pending create can stand for a resource the state
// no longer manages: its report must not die with the stream. A nil
// *repairLog records nothing, for a call without a stream.
type repairLog struct {
	rec  *agentpb.Recovery
	send func(*agentpb.Recovery) error
	// last is what was last sent.
	last *agentpb.Recovery
}

// newRepairLog starts an empty log that sends with send.
func newRepairLog(send func(*agentpb.Recovery) error) *repairLog {
	return &repairLog{rec: &agentpb.Recovery{}, send: send}
}

// locksCleared records stale locks removed.
func (l *repairLog) locksCleared(locks []*agentpb.StackLock) {
	if l == nil {
		return
	}
	l.rec.ClearedLocks = append(l.rec.ClearedLocks, locks...)
	l.announce()
}

// clearing records pending operations about to be cleared with method.
func (l *repairLog) clearing(pending []*agentpb.PendingOperation, method string) {
	if l == nil {
		return
	}
	l.rec.ClearingPendingOperations = append(l.rec.ClearingPendingOperations, pending...)
	l.rec.Method = method
	l.announce()
}

// pendingCleared records that the operations being cleared are.
func (l *repairLog) pendingCleared() {
	if l == nil {
		return
	}
	l.rec.ClearedPendingOperations = append(l.rec.ClearedPendingOperations, l.rec.ClearingPendingOperations...)
	l.rec.ClearingPendingOperations = nil
	l.announce()
}

// filesRemoved records damaged backend files removed.
func (l *repairLog) filesRemoved(files []string) {
	if l == nil {
		return
	}
	l.rec.RepairedFiles = append(l.rec.RepairedFiles, files...)
	l.announce()
}

// recovery is what was repaired, for the Result; nil when nothing was.
func (l *repairLog) recovery() *agentpb.Recovery {
	if l == nil || proto.Size(l.rec) == 0 {
		return nil
	}
	return l.rec
}

// announce sends the Recovery when it differs from what was last sent. A
// failed send is the stream's end, which the operation finds out by
// itself.
func (l *repairLog) announce() {
	if proto.Size(l.rec) == 0 || (l.last != nil && proto.Equal(l.rec, l.last)) {
		return
	}
	snapshot := proto.Clone(l.rec).(*agentpb.Recovery)
	if l.send(snapshot) == nil {
		l.last = snapshot
	}
}
