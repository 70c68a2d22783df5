package update

import (
	"fmt"
	"strings"

	"github.com/stackyard/stackyard/internal/agent/agentpb"
)

// describeRecovery says in one sentence what the agent repaired before an
// operation (agentpb.Recovery): the stale locks it cleared and why each
// holder was judged gone, the pending operations it cleared (or was
// clearing when the operation ended) and how, the damaged files of a
// file:// backend it removed. Empty when nothing. It names pids, hosts,
// URNs and paths, never a value.
func describeRecovery(rec *agentpb.Recovery) string {
	var parts []string
	if locks := rec.GetClearedLocks(); len(locks) > 0 {
		held := make([]string, 0, len(locks))
		for _, l := range locks {
			held = append(held, fmt.Sprintf("pid %d on %s: %s", l.GetPid(), l.GetHostname(), l.GetWhy()))
		}
		parts = append(parts, fmt.Sprintf("cleared %s of the stack (%s)", count(len(locks), "stale lock"), strings.Join(held, "; ")))
	}
	how := ""
	if m := rec.GetMethod(); m != "" {
		how = " with " + m
	}
	if ops := rec.GetClearedPendingOperations(); len(ops) > 0 {
		parts = append(parts, fmt.Sprintf("cleared %s an interrupted run left%s (%s)", count(len(ops), "pending operation"), how, pendingList(ops)))
	}
	if ops := rec.GetClearingPendingOperations(); len(ops) > 0 {
		// The stream ended, or the clearing failed, before it was done.
		parts = append(parts, fmt.Sprintf("found %s an interrupted run left, whose clearing%s did not finish (%s)",
			count(len(ops), "pending operation"), how, pendingList(ops)))
	}
	if creates(rec.GetClearedPendingOperations()) || creates(rec.GetClearingPendingOperations()) {
		parts[len(parts)-1] += "; a pending create may stand for a resource that exists and is no longer managed: look for it, and import it if so"
	}
	if files := rec.GetRepairedFiles(); len(files) > 0 {
		parts = append(parts, fmt.Sprintf("removed %s of the backend (%s)", count(len(files), "damaged file"), strings.Join(files, ", ")))
	}
	return strings.Join(parts, "; and ")
}

// pendingList names each pending operation: its type and URN.
func pendingList(ops []*agentpb.PendingOperation) string {
	names := make([]string, 0, len(ops))
	for _, op := range ops {
		names = append(names, op.GetType()+" "+op.GetUrn())
	}
	return strings.Join(names, ", ")
}

// creates reports whether ops hold a pending create.
func creates(ops []*agentpb.PendingOperation) bool {
	for _, op := range ops {
		if op.GetType() == "creating" {
			return true
		}
	}
	return false
}

// count says n things, with an English plural.
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
