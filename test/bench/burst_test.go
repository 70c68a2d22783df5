//go:build bench

package bench

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// floorParallelism are the parallelisms tried for the bare CLI floor.
var floorParallelism = []int{1, 2, 4}

// floorCalibration is how many stacks each parallelism is tried on; at a
// larger N only the fastest is run on all N stacks.
const floorCalibration = 10

// burstPhases split each Stack's time in a burst.
var burstPhases = []string{"create→Update created", "created→InProgress", "InProgress→Complete"}

// BurstResult is N Stacks applied at once.
type BurstResult struct {
	N int `json:"n"`
	// AllReady is the first create → the last Stack Ready.
	AllReady Seconds `json:"allReady"`
	// FirstReady and MedianReady are from the first create too.
	FirstReady  Seconds `json:"firstReady"`
	MedianReady Seconds `json:"medianReady"`
	// Floor is N bare `pulumi stack init` + `pulumi up` at the best
	// parallelism, FloorParallelism.
	Floor            Seconds `json:"floor"`
	FloorParallelism int     `json:"floorParallelism"`
	// FloorTries are the calibration runs: parallelism → seconds for
	// FloorTriesN stacks.
	FloorTries  map[int]Seconds `json:"floorTries"`
	FloorTriesN int             `json:"floorTriesN"`
	Ratio       float64         `json:"ratio"`
	// PeakPSS and PeakRSS are the operator's process tree's largest
	// memory, sampled every 500 ms, in bytes (RSS as it was at the PSS
	// peak).
	PeakPSS int64 `json:"peakPSS"`
	PeakRSS int64 `json:"peakRSS"`
	// Phases are medians over the N Stacks, in seconds: the first create →
	// the Stack's Update created (Workspace and agent set up first, agents
	// waiting their turn), created → InProgress, InProgress → Complete.
	Phases map[string]Seconds `json:"phases"`
	// MaxAgents is the most agents seen running at once.
	MaxAgents int `json:"maxAgents"`
	// CPU is where the processor time went; nil in runs from before it
	// was measured.
	CPU *BurstCPU `json:"cpu,omitempty"`
	// Requests are the API server's requests per Stack during the burst,
	// by verb and resource ("PATCH stacks/status"), from its own
	// apiserver_request_total, watches left out; the bench's own creates of
	// the Stacks are in "POST stacks". Absent in runs from before it was
	// measured.
	Requests map[string]float64 `json:"requests,omitempty"`
}

// BurstCPU splits the processor time of a burst, in seconds of one core,
// from /proc: utime+stime of the processes and of the children they
// waited for (a plugin its CLI did not wait for is not counted, on
// either side).
type BurstCPU struct {
	// Operator is the operator's process tree during the burst: the
	// operator, its agents, their Pulumi CLIs, language hosts and
	// providers.
	Operator Seconds `json:"operator"`
	// ControlPlane is kube-apiserver and etcd during the burst, which
	// share the machine here and run elsewhere in a real cluster.
	ControlPlane Seconds `json:"controlPlane"`
	// Floor is the bare CLI runs of the floor's figure.
	Floor Seconds `json:"floor"`
}

// benchBurst creates n Stacks at once and times them to Ready, then runs
// the bare CLI floor.
func benchBurst(t *testing.T, h *harness, n int) BurstResult {
	ns := fmt.Sprintf("burst-%d", n)
	h.createNamespace(t, ns)
	res := BurstResult{N: n, FloorTries: map[int]Seconds{}}

	req0, err := h.apiRequests()
	if err != nil {
		t.Fatal(err)
	}
	samp := startSampler(h.pid(), 500*time.Millisecond)
	op0, cp0 := treeCPU(tree(h.pid())), controlPlaneCPU()
	start := time.Now()
	backend := freshBackend(t)
	if err := inParallel(n, 16, func(i int) error {
		st := h.stack(ns, fmt.Sprintf("s%04d", i), fmt.Sprintf("b%d-%04d", n, i), "hello")
		st.Spec.Backend = "file://" + backend
		return h.client.Create(context.Background(), st)
	}); err != nil {
		t.Fatal(err)
	}
	marks, found := h.rec.waitReady(stackKeys(ns, "s", n), 1, nil)
	peak, maxAgents := samp.Stop()
	cpu := &BurstCPU{
		Operator:     tickSeconds(treeCPU(tree(h.pid())) - op0),
		ControlPlane: tickSeconds(controlPlaneCPU() - cp0),
	}
	if found < n {
		t.Fatalf("%d of %d Stacks Ready after %s: %v", found, n, burstTimeout(n), h.rec.failures(ns))
	}
	req1, err := h.apiRequests()
	if err != nil {
		t.Fatal(err)
	}
	var census string
	res.Requests, census = requestsPer(req0, req1, n)
	t.Logf("N=%d: API requests per Stack: %s", n, census)
	readyAt := readySince(marks, start)
	res.AllReady, res.FirstReady, res.MedianReady = Sec(readyAt[n-1]), Sec(readyAt[0]), Sec(readyAt[n/2])
	res.PeakPSS, res.PeakRSS, res.MaxAgents = peak.PSS, peak.RSS, maxAgents
	phases := make([][]float64, len(burstPhases))
	for _, m := range marks {
		created, started, complete, _ := h.rec.updateTimes(ns + "/" + m.lastUpdate)
		if started.IsZero() {
			started = created
		}
		for j, d := range []time.Duration{created.Sub(start), started.Sub(created), complete.Sub(started)} {
			phases[j] = append(phases[j], d.Seconds())
		}
	}
	res.Phases = map[string]Seconds{}
	for j, ph := range burstPhases {
		res.Phases[ph] = Seconds(spreadOf(phases[j]).Median)
	}
	t.Logf("N=%d: all Ready in %.1fs (first %.1fs), peak PSS %d MiB, at most %d agents",
		n, res.AllReady, res.FirstReady, peak.PSS>>20, maxAgents)

	// The floor: the same stacks by hand, at each parallelism on a
	// calibration set, then at the fastest on all n.
	res.FloorTriesN = min(n, floorCalibration)
	best := 0
	floorCPU := map[int]Seconds{}
	for _, p := range floorParallelism {
		cpu0 := childCPU()
		took, err := h.bareBurst(freshBackend(t), fmt.Sprintf("f%d-p%d", n, p), res.FloorTriesN, p)
		if err != nil {
			t.Fatal(err)
		}
		floorCPU[p] = tickSeconds(childCPU() - cpu0)
		res.FloorTries[p] = Sec(took)
		t.Logf("floor: %d bare ups at parallelism %d in %.1fs", res.FloorTriesN, p, took.Seconds())
		if best == 0 || res.FloorTries[p] < res.FloorTries[best] {
			best = p
		}
	}
	res.FloorParallelism, res.Floor = best, res.FloorTries[best]
	cpu.Floor = floorCPU[best]
	if n > res.FloorTriesN {
		cpu0 := childCPU()
		took, err := h.bareBurst(freshBackend(t), fmt.Sprintf("f%d-all", n), n, best)
		if err != nil {
			t.Fatal(err)
		}
		cpu.Floor = tickSeconds(childCPU() - cpu0)
		res.Floor = Sec(took)
		t.Logf("floor: %d bare ups at parallelism %d in %.1fs", n, best, took.Seconds())
	}
	res.Ratio = float64(res.AllReady) / float64(res.Floor)
	res.CPU = cpu
	t.Logf("CPU: operator's tree %.1fs, control plane %.1fs; floor %.1fs", cpu.Operator, cpu.ControlPlane, cpu.Floor)
	return res
}

// bareBurst runs n bare stack init + up, p at a time, on stacks named
// prefix-<i> in the file backend in backend, and returns the wall time.
func (h *harness) bareBurst(backend, prefix string, n, p int) (time.Duration, error) {
	start := time.Now()
	err := inParallel(n, p, func(i int) error {
		_, err := h.bareUp(backend, fmt.Sprintf("%s-%04d", prefix, i))
		return err
	})
	return time.Since(start), err
}
