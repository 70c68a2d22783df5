package faults

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/test/provider"
)

// killMode is when, within an update, the operator is killed.
type killMode string

const (
	// killAfterDelay kills after a random delay from the config change.
	killAfterDelay killMode = "delay"
	// killAtWrite kills the moment the provider's journal shows the new
	// value written: pulumi has applied the change and nobody has recorded
	// it yet, the window where a change is most easily applied twice.
	killAtWrite killMode = "at-write"
)

// testOperatorKilled changes the config of several Stacks, kills the
// operator with SIGKILL at a random point of the updates that follow and
// starts it again, OperatorKills times. Then every Stack must converge to
// Ready at its latest generation, no Update may stay in progress, the
// state must hold every update the operator recorded as a success and no
// pending operation or lock, and no change pulumi had recorded as applied
// may be written again. How often a change was written twice because the
// kill fell between the write and the state's checkpoint is measured and
// logged, not asserted: that window is the engine's, not the operator's.
func (s *suite) testOperatorKilled(t *testing.T) {
	rnd := seeded(t)
	ns, journal := s.newNamespace(t, "opkill-")
	repo := s.newRepo(ns, program(s.outDir, ""))
	// The kills are spread over the time the first updates took: an
	// operator's restart takes the agents down, so every update after a
	// kill starts its agent again, as these did.
	names, window := s.deployStacks(t, ns, repo, journal, s.params.Stacks)
	t.Logf("first updates of %d Stacks took %s; kills fall within that of a change", len(names), fmtDuration(window))

	var kills []string
	lastKill := time.Now()
	for i := 1; i <= s.params.OperatorKills; i++ {
		value := fmt.Sprintf("v%d", i)
		changed := time.Now()
		for _, name := range names {
			s.setConfig(t, ns, name, map[string]any{"message": value})
		}
		mode := killAfterDelay
		if rnd.IntN(3) == 0 {
			mode = killAtWrite
		}
		delay := time.Duration(rnd.Float64() * float64(window))
		switch mode {
		case killAtWrite:
			waitWrite(t, journal, value, 2*window)
		case killAfterDelay:
			time.Sleep(delay)
		}
		running := s.runningUpdates(t, ns)
		if err := s.op.Kill(); err != nil {
			fatal(t, err)
		}
		lastKill = time.Now()
		kills = append(kills, fmt.Sprintf("kill %d: %s, %s after the change, %d updates running %v",
			i, mode, fmtDuration(time.Since(changed)), len(running), running))
		t.Log(kills[len(kills)-1])
		if err := s.op.Start(); err != nil {
			fatal(t, err)
		}
	}
	final := fmt.Sprintf("v%d", s.params.OperatorKills)
	s.waitConverged(t, ns, 5*time.Minute, names...)
	t.Logf("converged %s after the last kill", fmtDuration(time.Since(lastKill)))

	if left := s.inProgress(t, ns); len(left) > 0 {
		errorf(t, "Updates still in progress after every Stack converged: %v", left)
	}
	for _, name := range names {
		if got := readFile(t, filepath.Join(s.outDir, name+".txt")); got != final {
			errorf(t, "%s: the file holds %q, want the last value %q", name, got, final)
		}
	}
	report := s.checkWrites(t, ns, names, readJournal(t, journal))
	t.Logf("RESULT operator-killed: kills=%d stacks=%d %s", s.params.OperatorKills, len(names), report)
}

// runningUpdates lists the Updates of ns whose operation runs
// (Progressing=True, reason InProgress).
func (s *suite) runningUpdates(t *testing.T, ns string) []string {
	t.Helper()
	var out []string
	for _, u := range s.updates(t, ns) {
		c := apimeta.FindStatusCondition(u.Status.Conditions, autov1alpha1.UpdateConditionTypeProgressing)
		if c != nil && c.Status == metav1.ConditionTrue && c.Reason == autov1alpha1.UpdateReasonInProgress {
			out = append(out, u.Name)
		}
	}
	return out
}

// waitWrite returns as soon as the journal shows a file written with
// content value, or after timeout.
func waitWrite(t *testing.T, journal, value string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, e := range readJournal(t, journal) {
			if e.Op != "create" && e.Op != "update" {
				continue
			}
			if c, _ := e.Inputs["content"].(string); c == value {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkWrites checks the provider's journal against the stacks' state and
// the Updates, and returns a summary of what it counted:
//
//   - the file that never changes was created once and never written
//     again;
//   - every Update the operator recorded as a success is an update in the
//     Pulumi history (the state lost none), and the checkpoint holds no
//     pending operation and no lock;
//   - no value was written after an update that applied it had ended (a
//     change applied twice by two successful runs).
//
// Values written twice because a run died between the write and its
// checkpoint are counted, not failed; so are values written by a run that
// died before recording them, the refreshes that then read such a write
// into the state, and updates that succeeded in pulumi while their Update
// was recorded as interrupted.
func (s *suite) checkWrites(t *testing.T, ns string, names []string, journal []provider.JournalEntry) string {
	t.Helper()
	var (
		changes, writes, once, twice, interrupted int
		healed, appliedUnrecorded                 int
	)
	updates := s.updates(t, ns)
	for _, name := range names {
		hist := s.checkState(t, name)
		byValue := map[string][]time.Time{}
		var order []string
		for _, e := range journal {
			if stackOfURN(e.URN) != name {
				continue
			}
			switch resourceName(e.URN) {
			case "static":
				if e.Op != "create" || slices.ContainsFunc(journal, func(o provider.JournalEntry) bool {
					return o.URN == e.URN && o.Time.Before(e.Time)
				}) {
					errorf(t, "%s: the unchanged file was written again: %s at %s", name, e.Op, e.Time)
				}
			case "greeting":
				if e.Op == "delete" {
					errorf(t, "%s: the file was deleted at %s", name, e.Time)
					continue
				}
				v, _ := e.Inputs["content"].(string)
				if _, seen := byValue[v]; !seen {
					order = append(order, v)
				}
				byValue[v] = append(byValue[v], e.Time)
				writes++
			}
		}
		// When each value was recorded as applied: the end of the
		// successful updates that changed the file to it.
		appliedAt := map[string]time.Time{}
		for _, h := range hist {
			if h.Kind == "refresh" && h.Result == "succeeded" && h.ResourceChanges["update"] > 0 {
				// The refresh before a retry read what a dead run had
				// written into the state (its pending operations).
				healed++
			}
			if h.Kind != "update" || h.Result != "succeeded" || h.ResourceChanges["update"]+h.ResourceChanges["create"] == 0 {
				continue
			}
			v := h.Config[project+":message"].Value
			if at, ok := appliedAt[v]; !ok || h.EndTime.Before(at) {
				appliedAt[v] = h.EndTime
			}
		}
		for _, v := range order {
			at := byValue[v]
			changes++
			end, applied := appliedAt[v]
			if !applied {
				interrupted++
			}
			if len(at) == 1 {
				once++
				continue
			}
			for _, w := range at[1:] {
				// History times are whole seconds, cut down.
				if applied && !w.Before(end.Add(time.Second)) {
					errorf(t, "%s: %q was written again at %s after an update that applied it ended at %s: a change applied twice",
						name, v, w.Format(time.RFC3339Nano), end.Format(time.RFC3339))
				}
			}
			twice++
			t.Logf("%s: %q written %d times (%v): a run died between the write and its checkpoint", name, v, len(at), at)
		}
		for v := range appliedAt {
			if len(byValue[v]) == 0 && v != "" {
				errorf(t, "%s: the history applied %q, which the journal never saw written", name, v)
			}
		}
		appliedUnrecorded += s.matchHistory(t, name, hist, updates)
	}
	return fmt.Sprintf("values-written=%d writes=%d written-once=%d written-more=%d "+
		"written-by-a-run-that-never-recorded-it=%d refreshes-that-took-a-dead-run's-write=%d "+
		"pulumi-succeeded-but-Update-not=%d",
		changes, writes, once, twice, interrupted, healed, appliedUnrecorded)
}

// matchHistory fails the test for every `up` Update of Stack name that
// succeeded without a successful update in the stack's Pulumi history
// over the same time, and returns how many successful updates in the
// history no successful Update stands for (runs that finished in pulumi
// while the operator died before recording them).
func (s *suite) matchHistory(t *testing.T, name string, hist []historyEntry, updates []autov1alpha1.Update) int {
	t.Helper()
	used := make([]bool, len(hist))
	var succeeded []autov1alpha1.Update
	for _, u := range updates {
		if u.Spec.StackName == name && u.Spec.Type == autov1alpha1.UpType && u.Status.IsComplete() && !u.Status.IsFailed() {
			succeeded = append(succeeded, u)
		}
	}
	// The Updates of one stack run one after the other, and each one's
	// pulumi update runs within its startTime and endTime. Taken in order,
	// each Update ran the earliest unclaimed update of the history within
	// its times. Both sides' times are whole seconds, cut down, so a
	// second of slack either side; matching the closest start instead
	// gave one Update its successor's update when the engine started a
	// second or two late, on a loaded machine.
	slices.SortFunc(succeeded, func(a, b autov1alpha1.Update) int { return a.Status.StartTime.Compare(b.Status.StartTime.Time) })
	for _, u := range succeeded {
		from, to := u.Status.StartTime.Add(-time.Second), u.Status.EndTime.Add(time.Second)
		i := -1
		for j, h := range hist {
			if used[j] || h.Kind != "update" || h.Result != "succeeded" || h.StartTime.Before(from) || h.EndTime.After(to) {
				continue
			}
			if i < 0 || h.StartTime.Before(hist[i].StartTime) || h.StartTime.Equal(hist[i].StartTime) && h.EndTime.Before(hist[i].EndTime) {
				i = j
			}
		}
		if i < 0 {
			errorf(t, "%s: Update %s succeeded (%s to %s) but the stack's history has no update then: %s",
				name, u.Name, u.Status.StartTime.Format(time.RFC3339), u.Status.EndTime.Format(time.RFC3339), summarizeHistory(hist))
			continue
		}
		used[i] = true
	}
	unmatched := 0
	for i, h := range hist {
		if h.Kind != "update" || h.Result != "succeeded" || used[i] {
			continue
		}
		unmatched++
		var then []string
		for _, u := range updates {
			if u.Spec.StackName == name && u.Spec.Type == autov1alpha1.UpType &&
				!u.Status.StartTime.Time.After(h.EndTime.Add(time.Second)) && !u.Status.EndTime.Time.Before(h.StartTime.Add(-2*time.Second)) {
				then = append(then, fmt.Sprintf("%s %s-%s failed=%v %s: %s", u.Name, u.Status.StartTime.Format(time.TimeOnly),
					u.Status.EndTime.Format(time.TimeOnly), u.Status.IsFailed(), failureReason(&u), u.Status.Message))
			}
		}
		t.Logf("%s: pulumi's update %s-%s (%q, %v) is no succeeded Update's; Updates then: %v", name, h.StartTime.Format(time.TimeOnly),
			h.EndTime.Format(time.TimeOnly), h.Config[project+":message"].Value, h.ResourceChanges, then)
	}
	return unmatched
}

// summarizeHistory renders a history for a failure message.
func summarizeHistory(hist []historyEntry) string {
	var parts []string
	for _, h := range hist {
		parts = append(parts, fmt.Sprintf("%s %s %s-%s %q %v", h.Kind, h.Result, h.StartTime.Format(time.TimeOnly),
			h.EndTime.Format(time.TimeOnly), h.Config[project+":message"].Value, h.ResourceChanges))
	}
	return strings.Join(parts, "; ")
}
