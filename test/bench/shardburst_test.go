//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stackyard/stackyard/internal/shard"
	"github.com/stackyard/stackyard/test/testenv"
)

// envShardBurstN is the size of the burst under shards.
const envShardBurstN = "BENCH_SHARD_BURST_N"

// ShardBurstResult is a burst of N new Stacks spread over k shards, each
// shard an operator process with its own agents (local runtime, default
// --max-agents), on one machine.
type ShardBurstResult struct {
	Shards int `json:"shards"`
	N      int `json:"n"`
	// AllReady and MedianReady are from the first create.
	AllReady    Seconds `json:"allReady"`
	MedianReady Seconds `json:"medianReady"`
	// CPU is the shards' process trees' processor time during the burst,
	// ControlPlane kube-apiserver's and etcd's, in seconds of one core.
	CPU          Seconds `json:"cpu"`
	ControlPlane Seconds `json:"controlPlane"`
	// PeakPSS is the sum of each shard's tree's largest memory, sampled
	// every 500 ms; MaxAgents the sum of each shard's most agents at once
	// (an upper bound of the machine's).
	PeakPSS   int64 `json:"peakPSS"`
	MaxAgents int   `json:"maxAgents"`
	// Requests is the API requests per Stack during the burst, by verb
	// and resource, as figure 2 counts them.
	Requests map[string]float64 `json:"requests,omitempty"`
	// CompleteToReady spreads, over the N Stacks, the time from their
	// Update complete to the Stack Ready.
	CompleteToReady *Spread `json:"completeToReady,omitempty"`
}

// TestBenchShardBurst measures the burst part of figure 7: BENCH_SHARD_BURST_N
// (default 1000) new Stacks at once under each count of shards in
// BENCH_SHARDS (default "1 2 4"). It adds the bursts to the committed
// record (results/scale.json) and renders figure 7 again.
func TestBenchShardBurst(t *testing.T) {
	log.SetLogger(logr.Discard())
	rec := readScale()
	if rec == nil {
		t.Fatalf("no record at %s: run make bench-scale first", scaleFile())
	}
	h := startHarness(t, durationEnv(t, envIdleAfter, 10*time.Second))
	// Every count starts its own operators; the harness's would own
	// every Stack beside them.
	if err := h.op.Stop(); err != nil {
		t.Fatal(err)
	}
	bin, err := testenv.BuildStackyard(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	n := intsEnv(t, envShardBurstN, []int{1000})[0]
	rec.Bursts = nil
	for _, k := range intsEnv(t, envShards, []int{1, 2, 4}) {
		rec.Bursts = append(rec.Bursts, shardBurst(t, h, bin, n, k))
	}
	rec.BurstsMachine = ptrTo(machineFacts())
	if err := saveScale(rec); err != nil {
		t.Fatal(err)
	}
}

// shardBurst starts k operators (the default shard and k-1 named ones),
// waits until they have nothing left to do from earlier counts, then
// creates n Stacks labelled round robin over the shards and times them to
// Ready.
func shardBurst(t *testing.T, h *harness, bin string, n, k int) ShardBurstResult {
	ctx := context.Background()
	ns := fmt.Sprintf("shards-%d", k)
	h.createNamespace(t, ns)
	names := shardNames(k)
	ops := make([]*testenv.Operator, k)
	for j := range ops {
		args := []string{"--idle-after", h.idleAfter.String()}
		if len(names) > 0 {
			args = append(args, "--shards", strings.Join(names, ","))
		}
		if j > 0 {
			args = append(args, "--shard", names[j-1])
		}
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("shard-%d", j))
		ops[j] = testenv.StartOperator(t, testenv.OperatorOptions{Bin: bin, Dir: dir, Config: h.env.Config, Args: args})
	}
	defer func() {
		for _, op := range ops {
			_ = op.Stop()
		}
	}()
	// The Stacks of earlier counts are Ready: the new operators reconcile
	// them once, and start nothing.
	if !waitFor(10*time.Minute, func() bool {
		for _, op := range ops {
			if metric(op, "workqueue_depth", `name="stack"`) != 0 || metric(op, "workqueue_depth", `name="workspace"`) != 0 {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("%d shards: the operators did not settle", k)
	}
	time.Sleep(5 * time.Second)

	roots := func() []int {
		var p []int
		for _, op := range ops {
			p = append(p, op.Pid())
		}
		return p
	}
	samplers := make([]*sampler, k)
	for j, p := range roots() {
		samplers[j] = startSampler(p, 500*time.Millisecond)
	}
	cpuOf := func() int64 {
		var c int64
		for _, p := range roots() {
			c += treeCPU(tree(p))
		}
		return c
	}
	op0, cp0 := cpuOf(), controlPlaneCPU()
	req0, err := h.apiRequests()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	backend := freshBackend(t)
	if err := inParallel(n, 16, func(i int) error {
		st := h.stack(ns, fmt.Sprintf("s%04d", i), fmt.Sprintf("k%d-%04d", k, i), "hello")
		st.Spec.Backend = "file://" + backend
		if name := shardOf(i, k); name != "" {
			st.Labels = map[string]string{shard.Label: name}
		}
		return h.client.Create(ctx, st)
	}); err != nil {
		t.Fatal(err)
	}
	marks, found := h.rec.waitReady(stackKeys(ns, "s", n), 1, nil)
	res := ShardBurstResult{Shards: k, N: n, CPU: tickSeconds(cpuOf() - op0), ControlPlane: tickSeconds(controlPlaneCPU() - cp0)}
	if req1, err := h.apiRequests(); err == nil {
		res.Requests, _ = requestsPer(req0, req1, n)
	}
	for _, s := range samplers {
		peak, agents := s.Stop()
		res.PeakPSS += peak.PSS
		res.MaxAgents += agents
	}
	if found < n {
		t.Fatalf("%d shards: %d of %d Stacks Ready after %s: %v", k, found, n, burstTimeout(n), h.rec.failures(ns))
	}
	readyAt := readySince(marks, start)
	res.AllReady, res.MedianReady = Sec(readyAt[n-1]), Sec(readyAt[n/2])
	_, res.CompleteToReady = h.rec.phasesOf(ns, marks, start)
	t.Logf("shard burst: %+v", res)
	if res.CompleteToReady.Max > slowReady.Seconds() {
		traceSlowest(t, h.rec, ns, marks, ops)
	}
	return res
}

// slowReady is how long from an Update's end to its Stack Ready makes
// the bench trace that Stack: nine in ten take under 4 s under 4 shards.
const slowReady = 10 * time.Second

// traceSlowest logs, for the Stack that waited longest between its
// Update's end and Ready, the times the watch saw and every operator log
// line that names it or its Update: the spread alone cannot say what the
// Stack waited for.
func traceSlowest(t *testing.T, rec *recorder, ns string, marks []readyMark, ops []*testenv.Operator) {
	var worst readyMark
	var worstWait time.Duration
	for _, m := range marks {
		_, _, complete, _ := rec.updateTimes(ns + "/" + m.lastUpdate)
		if wait := m.at.Sub(complete); !complete.IsZero() && wait > worstWait {
			worst, worstWait = m, wait
		}
	}
	created, started, complete, _ := rec.updateTimes(ns + "/" + worst.lastUpdate)
	t.Logf("slowest to Ready: Update %s/%s created %s, started %s, complete %s, Stack Ready %s (%.1fs after; the operator stamped Ready at %s)",
		ns, worst.lastUpdate, created.Format(time.StampMilli), started.Format(time.StampMilli),
		complete.Format(time.StampMilli), worst.at.Format(time.StampMilli), worstWait.Seconds(), worst.stamped.Format(time.Stamp))
	stackName, _, _ := strings.Cut(worst.lastUpdate, "-")
	for j, op := range ops {
		b, err := os.ReadFile(op.LogPath)
		if err != nil {
			t.Logf("shard %d: %v", j, err)
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, worst.lastUpdate) || strings.Contains(line, `"`+stackName+`"`) {
				t.Logf("shard %d: %s", j, line)
			}
		}
	}
}
