package cloudapi

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/source"
)

// operation is one operation of a Pulumi stack, from a Stack's status.
type operation struct {
	// name is the Update object's name.
	name    string
	typ     autov1alpha1.UpdateType
	result  string
	commit  string
	message string
	start   time.Time
	end     time.Time
	changes map[string]int64
	// version is set by history.
	version int64
}

// preview reports whether the operation changed nothing.
func (o operation) preview() bool { return o.typ == autov1alpha1.PreviewType }

// operationsOf returns the operations a Stack's status records: its
// history, its lastUpdate when the history lacks it, and, as in-progress,
// its current update. running is the current update's Update object, nil
// when it could not be read: the kind is then guessed from spec.preview and
// the start time is unknown.
func operationsOf(stack *pulumiv1.Stack, running *autov1alpha1.Update) []operation {
	st := &stack.Status
	var ops []operation
	seen := map[string]bool{}
	for _, rec := range st.History {
		ops = append(ops, fromRecord(rec))
		seen[rec.Name] = true
	}
	if last := st.LastUpdate; last != nil && last.Name != "" && !seen[last.Name] && last.State != "" {
		ops = append(ops, operation{
			name: last.Name, typ: last.Type, result: string(last.State), commit: last.LastAttemptedCommit,
			message: last.Message, start: last.LastResyncTime.Time, end: last.LastResyncTime.Time,
		})
		seen[last.Name] = true
	}
	if cur := st.CurrentUpdate; cur != nil && cur.Name != "" && !seen[cur.Name] {
		op := operation{name: cur.Name, typ: autov1alpha1.UpType, result: ResultInProgress, commit: cur.Commit}
		if stack.Spec.Preview {
			op.typ = autov1alpha1.PreviewType
		}
		if running != nil {
			op.typ = cmp.Or(running.Spec.Type, op.typ)
			op.start = running.Status.StartTime.Time
		}
		ops = append(ops, op)
	}
	return ops
}

// fromRecord converts one status.history entry.
func fromRecord(rec shared.UpdateRecord) operation {
	return operation{
		name: rec.Name, typ: rec.Type, result: string(rec.State), commit: rec.Commit, message: rec.Message,
		start: rec.StartTime.Time, end: rec.EndTime.Time, changes: rec.Changes,
	}
}

// history merges the operations of the Stacks that deploy one Pulumi
// stack, oldest first, one per Update name, and numbers them: a
// non-preview operation's version is its start time in Unix seconds, raised
// to one more than the previous version where needed; a preview's is the
// version of the non-preview operation before it (0 when none).
func history(lists ...[]operation) []operation {
	var ops []operation
	seen := map[string]bool{}
	for _, list := range lists {
		for _, op := range list {
			if !seen[op.name] {
				seen[op.name] = true
				ops = append(ops, op)
			}
		}
	}
	slices.SortStableFunc(ops, func(a, b operation) int {
		return cmp.Or(sortTime(a).Compare(sortTime(b)), cmp.Compare(a.name, b.name))
	})
	var last int64
	for i := range ops {
		if !ops[i].preview() {
			last = max(ops[i].start.Unix(), last+1)
		}
		ops[i].version = last
	}
	return ops
}

// sortTime places an operation in time: its start, or its end when the
// start is unknown; an operation running with no known start sorts last.
func sortTime(op operation) time.Time {
	switch {
	case !op.start.IsZero():
		return op.start
	case !op.end.IsZero():
		return op.end
	case op.result == ResultInProgress:
		return time.Unix(1<<40, 0)
	}
	return time.Time{}
}

// updates returns the non-preview operations of a history, newest first.
func updates(ops []operation) []operation {
	var out []operation
	for _, op := range slices.Backward(ops) {
		if !op.preview() {
			out = append(out, op)
		}
	}
	return out
}

// previews returns the previews run since the last non-preview operation
// of a history, oldest first.
func previews(ops []operation) []operation {
	i := len(ops)
	for i > 0 && ops[i-1].preview() {
		i--
	}
	return slices.Clone(ops[i:])
}

// latestVersion is the version of the newest non-preview operation.
func latestVersion(ops []operation) int64 {
	if len(ops) == 0 {
		return 0
	}
	return ops[len(ops)-1].version
}

// info renders an operation in the CLI shape; previewKind is the kind a
// preview is reported as.
func info(op operation, previewKind string) UpdateInfo {
	u := UpdateInfo{
		Kind:            kind(op.typ, previewKind),
		StartTime:       unix(op.start),
		Message:         op.message,
		Environment:     map[string]string{},
		Config:          map[string]any{},
		Result:          op.result,
		EndTime:         unix(op.end),
		Version:         op.version,
		ResourceChanges: maps.Clone(op.changes),
	}
	if op.result == ResultInProgress {
		u.EndTime = 0
	}
	if head := gitHead(op.commit); head != "" {
		u.Environment[GitHeadKey] = head
	}
	if op.result == ResultSucceeded && !op.preview() {
		u.ResourceCount = resourceCount(op.changes)
	}
	return u
}

// service renders an operation in the service shape.
func service(op operation, previewKind string, latest int64) ServiceUpdate {
	return ServiceUpdate{
		Info: info(op, previewKind), UpdateID: op.name, Version: op.version, LatestVersion: latest,
		RequestedBy: requester,
	}
}

// kind maps an Update's type to Pulumi's update kind.
func kind(t autov1alpha1.UpdateType, previewKind string) string {
	switch t {
	case autov1alpha1.PreviewType:
		return previewKind
	case autov1alpha1.RefreshType:
		return KindRefresh
	case autov1alpha1.DestroyType:
		return KindDestroy
	}
	return KindUpdate
}

// unix is a time in Unix seconds, 0 for the zero time.
func unix(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// gitHead returns the commit SHA a source revision names: the revision
// itself when it is one, the SHA of a Flux revision
// ("<ref>@sha1:<sha>", or "sha1:<sha>"), or "" (a Program's revision).
func gitHead(revision string) string {
	if i := strings.LastIndex(revision, "sha1:"); i >= 0 {
		revision = revision[i+len("sha1:"):]
	}
	if source.IsCommit(revision) {
		return revision
	}
	return ""
}

// counted are the operations whose resources the stack holds afterwards.
var counted = []string{"same", "create", "update", "replace", "import", "read"}

// resourceCount counts the resources a stack holds after an operation with
// these changes.
func resourceCount(changes map[string]int64) int64 {
	var n int64
	for _, op := range counted {
		n += changes[op]
	}
	return n
}

// page returns the page-th page (from 1) of pageSize items; pageSize 0 or
// page 0 means every item.
func page[T any](items []T, pageNo, pageSize int) []T {
	if pageSize <= 0 || pageNo <= 0 {
		return items
	}
	start := (pageNo - 1) * pageSize
	if start >= len(items) {
		return []T{}
	}
	return items[start:min(start+pageSize, len(items))]
}
