//go:build bench

package bench

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/stackyard/stackyard/test/testenv"
)

// Results is everything one run measured; it is written as JSON into
// results/ and rendered into docs/benchmarks.md.
type Results struct {
	Machine  Machine         `json:"machine"`
	Settings Settings        `json:"settings"`
	Latency  []LatencyResult `json:"latency,omitempty"`
	Burst    []BurstResult   `json:"burst,omitempty"`
	Idle     *IdleResult     `json:"idle,omitempty"`
	// Promotion is the release's way through a dev → prod pipeline.
	Promotion *PromotionResult `json:"promotion,omitempty"`
	// Push is a push through a Receiver to a branch-tracking Stack.
	Push *PushResult `json:"push,omitempty"`
	// Took is the wall time of the whole run.
	Took Seconds `json:"took"`
	// Measured names the figures this run measured when BENCH_RUN chose
	// some; the others are kept from the previous run's results.
	Measured []string `json:"measured,omitempty"`
}

// keep fills the figures r did not measure from prev.
func (r *Results) keep(prev *Results) {
	if prev == nil {
		return
	}
	if len(r.Latency) == 0 {
		r.Latency = prev.Latency
	}
	if len(r.Burst) == 0 {
		r.Burst = prev.Burst
	}
	if r.Idle == nil {
		r.Idle = prev.Idle
	}
	if r.Promotion == nil {
		r.Promotion = prev.Promotion
	}
	if r.Push == nil {
		r.Push = prev.Push
	}
}

// Settings are the knobs the run used.
type Settings struct {
	N         []int   `json:"n"`
	Repeat    int     `json:"repeat"`
	IdleAfter Seconds `json:"idleAfter"`
	IdleFor   Seconds `json:"idleFor"`
	// OperatorArgs are the flags the operator ran with.
	OperatorArgs []string `json:"operatorArgs"`
}

// Machine describes where the figures were taken.
type Machine struct {
	CPU        string  `json:"cpu"`
	Cores      int     `json:"cores"`
	MemoryGiB  float64 `json:"memoryGiB"`
	Kernel     string  `json:"kernel"`
	Go         string  `json:"go"`
	Pulumi     string  `json:"pulumi"`
	Commit     string  `json:"commit"`
	Dirty      bool    `json:"dirty"`
	Date       string  `json:"date"`
	LoadBefore string  `json:"loadBefore"`
	LoadAfter  string  `json:"loadAfter"`
	// OtherCPU is the share of the machine's CPU time, over the run, that
	// went to processes outside this benchmark (the bench test, the
	// control plane, the git server and the operator's process tree), in
	// cores.
	OtherCores float64 `json:"otherCores"`
}

// Seconds is a duration written as a number of seconds.
type Seconds float64

// Sec converts d.
func Sec(d time.Duration) Seconds { return Seconds(d.Seconds()) }

// Spread summarises repeated samples of one figure.
type Spread struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	P10    float64 `json:"p10"`
	P90    float64 `json:"p90"`
}

// spreadOf summarises xs (nearest-rank percentiles); empty xs give zeros.
func spreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	rank := func(p float64) float64 {
		i := int(p*float64(len(s))+0.5) - 1
		return s[max(0, min(len(s)-1, i))]
	}
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Spread{N: len(s), Median: med, Min: s[0], Max: s[len(s)-1], P10: rank(0.1), P90: rank(0.9)}
}

// machineFacts reads the machine's description from /proc and the tools.
func machineFacts() Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), Date: time.Now().UTC().Format(time.RFC3339)}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		_ = f.Close()
	}
	if kb := meminfo("MemTotal"); kb > 0 {
		m.MemoryGiB = float64(kb) / (1 << 20)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command(filepath.Join(testenv.BinDir(), "pulumi"), "version").Output(); err == nil {
		m.Pulumi = strings.TrimSpace(string(out))
	}
	m.Commit, m.Dirty = builtFrom.commit, builtFrom.dirty
	m.LoadBefore = loadavg()
	return m
}

// builtFrom is the tree's commit, and whether it had changes, when the
// bench binary started, just after `go test` built it and the operator
// from that tree: what a run measures, whatever HEAD is when a run of
// hours ends and records it.
var builtFrom = func() (s struct {
	commit string
	dirty  bool
}) {
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = testenv.RepoRoot()
		out, _ := cmd.Output()
		return strings.TrimSpace(string(out))
	}
	s.commit = git("rev-parse", "--short=12", "HEAD")
	s.dirty = git("status", "--porcelain", "--untracked-files=no") != ""
	return s
}()

// meminfo returns a /proc/meminfo field in KiB.
func meminfo(field string) int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == field {
			return parseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	return 0
}

// loadavg returns the 1, 5 and 15 minute load averages.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// writeResults writes r as indented JSON to path.
func writeResults(path string, r *Results) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// readResults reads what writeResults wrote.
func readResults(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Results
	return &r, json.Unmarshal(b, &r)
}
