//go:build bench

package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stackyard/stackyard/test/testenv"
)

// Environment knobs (the Makefile passes BENCH_N and BENCH_REPEAT).
const (
	// envN lists the burst sizes, e.g. "10 100".
	envN = "BENCH_N"
	// envRepeat is the repetitions of the latency figure.
	envRepeat = "BENCH_REPEAT"
	// envIdleAfter is the operator's --idle-after.
	envIdleAfter = "BENCH_IDLE_AFTER"
	// envIdleFor is the idle figure's window.
	envIdleFor = "BENCH_IDLE_FOR"
	// envScaleN is the scale figure's number of Stacks.
	envScaleN = "BENCH_SCALE_N"
	// envShards lists the scale figure's shard counts, e.g. "1 2 4"; the
	// burst under shards (shardburst_test.go) reads it too.
	envShards = "BENCH_SHARDS"
)

// resultsFile is where the latest run is written.
func resultsFile() string {
	return filepath.Join(testenv.RepoRoot(), "test", "bench", "results", "latest.json")
}

// docFile is the rendered document.
func docFile() string { return filepath.Join(testenv.RepoRoot(), "docs", "benchmarks.md") }

// TestBench runs every figure on one control plane and one operator, in
// order: latency (one Stack), promotion (a dev → prod pipeline), bursts (each N in its own namespace), idle
// (the largest burst's Stacks, the others deleted). It writes
// results/latest.json and docs/benchmarks.md.
func TestBench(t *testing.T) {
	began := time.Now()
	settings := Settings{
		N:         intsEnv(t, envN, []int{10, 100}),
		Repeat:    testenv.PositiveIntEnv(t, envRepeat, 10),
		IdleAfter: Sec(durationEnv(t, envIdleAfter, 10*time.Second)),
		IdleFor:   Sec(durationEnv(t, envIdleFor, 2*time.Minute)),
	}
	machine := machineFacts()
	busy0 := machineBusyTicks()
	h := startHarness(t, time.Duration(float64(settings.IdleAfter)*float64(time.Second)))
	self0 := treeCPU(tree(os.Getpid()))
	settings.OperatorArgs = h.opArgs
	res := &Results{Machine: machine, Settings: settings}
	// A run of some figures (BENCH_RUN) keeps the others from the previous
	// results, and says which it measured.
	prev, _ := readResults(resultsFile())
	subset := os.Getenv("BENCH_RUN")
	save := func() {
		if subset != "" {
			res.Measured = []string{subset}
			res.keep(prev)
		}
		res.Took = Sec(time.Since(began))
		busy := machineBusyTicks() - busy0
		ours := treeCPU(tree(os.Getpid())) - self0
		res.Machine.OtherCores = float64(busy-ours) / clockTicks / time.Since(began).Seconds()
		res.Machine.LoadAfter = loadavg()
		if err := writeResults(resultsFile(), res); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			// Keep the last good document; the JSON says what this run got.
			return
		}
		if err := os.WriteFile(docFile(), []byte(render(res)), 0o644); err != nil {
			t.Error(err)
		}
	}
	defer save()

	if !t.Run("latency", func(t *testing.T) { res.Latency = benchLatency(t, h, settings.Repeat) }) {
		return
	}
	if !t.Run("promotion", func(t *testing.T) { res.Promotion = benchPromotion(t, h, settings.Repeat) }) {
		return
	}
	if !t.Run("push", func(t *testing.T) { res.Push = benchPush(t, h, settings.Repeat) }) {
		return
	}
	largest := ""
	for _, n := range settings.N {
		ran := false
		ok := t.Run(fmt.Sprintf("burst-%d", n), func(t *testing.T) {
			res.Burst = append(res.Burst, benchBurst(t, h, n))
			ran = true
		})
		if !ok {
			return
		}
		if ran {
			largest = fmt.Sprintf("burst-%d", n)
		}
	}
	if largest == "" {
		return
	}
	t.Run("idle", func(t *testing.T) {
		res.Idle = benchIdle(t, h, largest, time.Duration(float64(settings.IdleFor)*float64(time.Second)))
	})
}

// TestBenchRender renders docs/benchmarks.md again from
// results/latest.json, for changes to the document's wording.
func TestBenchRender(t *testing.T) {
	res, err := readResults(resultsFile())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(docFile(), []byte(render(res)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// intsEnv reads a knob listing positive integers.
func intsEnv(t *testing.T, name string, def []int) []int {
	v := strings.Fields(strings.ReplaceAll(os.Getenv(name), ",", " "))
	if len(v) == 0 {
		return def
	}
	var out []int
	for _, s := range v {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want positive integers", name, os.Getenv(name))
		}
		out = append(out, n)
	}
	return out
}

// durationEnv reads a duration knob such as "10s".
func durationEnv(t *testing.T, name string, def time.Duration) time.Duration {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a duration such as 10s", name, v)
	}
	return d
}
