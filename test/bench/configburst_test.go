//go:build bench

package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/test/testenv"
)

// envConfigBurstN is how many of the Stacks change their config at once.
const envConfigBurstN = "BENCH_CONFIG_BURST_N"

// configBurstNamespace holds the Stacks whose config changes.
const configBurstNamespace = "config-burst"

// configFloorParallelism is the bare CLI's parallelism for the floor of a
// config burst: the fastest of figure 2's tries at every N.
const configFloorParallelism = 4

// ConfigBurstResult is a burst of config changes on one operator that
// holds many more Stacks: Stacks in all, N of them deployed for real, whose
// config then changes at once.
type ConfigBurstResult struct {
	Stacks int `json:"stacks"`
	N      int `json:"n"`
	// AllReady and MedianReady run from the first change to each Stack
	// Ready with the change deployed.
	AllReady    Seconds `json:"allReady"`
	MedianReady Seconds `json:"medianReady"`
	// Floor is N bare `pulumi up --config` of existing stacks, the same
	// change, at FloorParallelism.
	Floor            Seconds `json:"floor"`
	FloorParallelism int     `json:"floorParallelism"`
	Ratio            float64 `json:"ratio"`
	// CPU is the operator's process tree's processor time during the
	// burst, ControlPlane kube-apiserver's and etcd's; FloorCPU the bare
	// CLI's.
	CPU          Seconds `json:"cpu"`
	ControlPlane Seconds `json:"controlPlane"`
	FloorCPU     Seconds `json:"floorCPU"`
	PeakPSS      int64   `json:"peakPSS"`
	MaxAgents    int     `json:"maxAgents"`
	// Requests are the API requests per changed Stack during the burst.
	Requests map[string]float64 `json:"requests,omitempty"`
}

// TestBenchConfigBurst measures the config-change part of figure 7: one
// operator holding BENCH_SCALE_N Stacks (default 10000; seeded as figure 7
// seeds them, nothing due), BENCH_CONFIG_BURST_N (default 300) of them
// deployed for real, whose config then changes at once. It adds the result
// to results/scale.json and renders figure 7 again.
func TestBenchConfigBurst(t *testing.T) {
	log.SetLogger(logr.Discard())
	rec := readScale()
	if rec == nil {
		t.Fatalf("no record at %s: run make bench-scale first", scaleFile())
	}
	h := startHarness(t, durationEnv(t, envIdleAfter, 10*time.Second))
	total := intsEnv(t, envScaleN, []int{10000})[0]
	n := intsEnv(t, envConfigBurstN, []int{300})[0]
	res := configBurst(t, h, total, n)
	rec.ConfigBurst = &res
	rec.ConfigBurstMachine = ptrTo(machineFacts())
	if err := saveScale(rec); err != nil {
		t.Fatal(err)
	}
}

// configBurst seeds total-n idle Stacks, starts one operator on them,
// deploys n more for real, lets their agents idle, then changes the n
// Stacks' config at once and times them to Ready; then the floor.
func configBurst(t *testing.T, h *harness, total, n int) ConfigBurstResult {
	ctx := context.Background()
	// Seeding stops the harness's operator; a new one, built from this
	// tree, holds every Stack.
	seedScale(t, h, total-n)
	bin, err := testenv.BuildStackyard(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	op := testenv.StartOperator(t, testenv.OperatorOptions{Bin: bin, Dir: t.TempDir(), Config: h.env.Config,
		Args: []string{"--idle-after", h.idleAfter.String()}})
	defer func() { _ = op.Stop() }()
	settled := func() bool {
		return metric(op, "workqueue_depth", `name="stack"`) == 0 && metric(op, "workqueue_depth", `name="workspace"`) == 0
	}
	if !waitFor(10*time.Minute, settled) {
		t.Fatal("the operator did not settle on the seeded Stacks")
	}

	h.createNamespace(t, configBurstNamespace)
	backend := freshBackend(t)
	keys := stackKeys(configBurstNamespace, "c", n)
	if err := inParallel(n, 16, func(i int) error {
		st := h.stack(configBurstNamespace, fmt.Sprintf("c%04d", i), fmt.Sprintf("c%04d", i), "hello")
		st.Spec.Backend = "file://" + backend
		return h.client.Create(ctx, st)
	}); err != nil {
		t.Fatal(err)
	}
	marks, found := h.rec.waitReady(keys, 1, nil)
	if found < n {
		t.Fatalf("%d of the %d Stacks were deployed: %v", found, n, h.rec.failures(configBurstNamespace))
	}
	deployed := make([]string, n)
	for i, m := range marks {
		deployed[i] = m.lastUpdate
	}
	// The change finds the agents idle, as a change made later would.
	time.Sleep(h.idleAfter + 5*time.Second)
	if !waitFor(5*time.Minute, settled) {
		t.Fatal("the operator did not settle after deploying")
	}

	sampler := startSampler(op.Pid(), 500*time.Millisecond)
	op0, cp0 := treeCPU(tree(op.Pid())), controlPlaneCPU()
	req0, err := h.apiRequests()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := inParallel(n, 16, func(i int) error { return changeMessage(ctx, h.client, fmt.Sprintf("c%04d", i), "changed") }); err != nil {
		t.Fatal(err)
	}
	marks, found = h.rec.waitReady(keys, 2, deployed)
	res := ConfigBurstResult{Stacks: total, N: n, CPU: tickSeconds(treeCPU(tree(op.Pid())) - op0),
		ControlPlane: tickSeconds(controlPlaneCPU() - cp0), FloorParallelism: configFloorParallelism}
	peak, agents := sampler.Stop()
	res.PeakPSS, res.MaxAgents = peak.PSS, agents
	if req1, err := h.apiRequests(); err == nil {
		res.Requests, _ = requestsPer(req0, req1, n)
	}
	if found < n {
		t.Fatalf("%d of %d Stacks deployed the change: %v", found, n, h.rec.failures(configBurstNamespace))
	}
	readyAt := readySince(marks, start)
	res.AllReady, res.MedianReady = Sec(readyAt[n-1]), Sec(readyAt[n/2])
	if err := op.Stop(); err != nil {
		t.Fatal(err)
	}

	floor, floorCPU, err := h.bareConfigBurst(t, n)
	if err != nil {
		t.Fatal(err)
	}
	res.Floor, res.FloorCPU = Sec(floor), floorCPU
	res.Ratio = float64(res.AllReady) / float64(res.Floor)
	t.Logf("config burst: %+v", res)
	return res
}

// changeMessage sets the message config value of the config burst's Stack
// name, a new generation.
func changeMessage(ctx context.Context, c client.Client, name, value string) error {
	st := &pulumiv1.Stack{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: configBurstNamespace, Name: name}, st); err != nil {
		return err
	}
	base := st.DeepCopy()
	st.Spec.Config[project+":message"] = jsonString(value)
	return c.Patch(ctx, st, client.MergeFrom(base))
}

// bareConfigBurst is the floor of a config burst: n bare stacks are made
// and deployed (not timed), then `pulumi up --config` changes each one's
// message, configFloorParallelism at a time (timed, with the CLI's CPU).
func (h *harness) bareConfigBurst(t *testing.T, n int) (time.Duration, Seconds, error) {
	backend := freshBackend(t)
	if _, err := h.bareBurst(backend, "floor", n, configFloorParallelism); err != nil {
		return 0, 0, err
	}
	cpu0 := childCPU()
	start := time.Now()
	err := inParallel(n, configFloorParallelism, func(i int) error {
		_, err := pulumiOn(backend, h.progDir, "up", "--stack", fmt.Sprintf("floor-%04d", i), "--yes", "--skip-preview",
			"--config", project+":message=changed")
		return err
	})
	return time.Since(start), tickSeconds(childCPU() - cpu0), err
}
