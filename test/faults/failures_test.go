package faults

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// The scenarios fail through errorf, fatalf and fatal rather than the
// methods of testing.T, so the suite can repeat every failure's message,
// with the scenario's seed, as the last lines of its output: a report
// that keeps only the end (CI's does) would otherwise show the operator's
// log and not why a scenario failed.
var failures struct {
	sync.Mutex
	seeds map[string]uint64 // scenario name → its seed
	lines []string
}

// rememberSeed records the seed of t's scenario for the summary.
func rememberSeed(t *testing.T, seed uint64) {
	failures.Lock()
	defer failures.Unlock()
	if failures.seeds == nil {
		failures.seeds = map[string]uint64{}
	}
	failures.seeds[t.Name()] = seed
}

// remember keeps msg, a failure of t, for the summary.
func remember(t *testing.T, msg string) {
	failures.Lock()
	defer failures.Unlock()
	failures.lines = append(failures.lines, t.Name()+": "+msg)
}

// errorf marks t failed, as t.Errorf does, and keeps the message.
func errorf(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	remember(t, msg)
	t.Error(msg)
}

// fatalf stops t, as t.Fatalf does, and keeps the message.
func fatalf(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	remember(t, msg)
	t.Fatal(msg)
}

// fatal stops t, as t.Fatal does, and keeps the message.
func fatal(t *testing.T, args ...any) {
	t.Helper()
	fatalf(t, "%s", fmt.Sprint(args...))
}

// failureSummary is the kept failures, one per line, each scenario's
// first line naming the seed that replays it; empty when none.
func failureSummary() string {
	failures.Lock()
	defer failures.Unlock()
	var b strings.Builder
	named := map[string]bool{}
	for _, line := range failures.lines {
		scenario, _, _ := strings.Cut(line, ": ")
		if seed, ok := failures.seeds[scenario]; ok && !named[scenario] {
			named[scenario] = true
			fmt.Fprintf(&b, "%s: seed %d (FAULTS_SEED=%d)\n", scenario, seed, seed)
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}
