//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/controller/stack"
	"github.com/stackyard/stackyard/internal/shard"
	"github.com/stackyard/stackyard/internal/stackrun"
	"github.com/stackyard/stackyard/test/testenv"
)

// ScaleResult is one installation (one operator, or several shards)
// started on N Stacks that were deployed before it: their Workspaces exist
// and are set up, and nothing is due.
type ScaleResult struct {
	// Shards is how many operator processes share the Stacks (1: one
	// unsharded operator).
	Shards int `json:"shards"`
	Stacks int `json:"stacks"`
	// Restart is the time from starting the processes to every Stack and
	// Workspace reconciled: each shard's Stack and Workspace controllers
	// have reconciled as many objects as they watch, and their queues are
	// empty.
	Restart Seconds `json:"restart"`
	// RestartRequests are the API requests the processes made in that time.
	RestartRequests float64 `json:"restartRequests"`
	// Updates and Agents count what the restart and the idle window
	// started: both should be 0.
	Updates   int `json:"updates"`
	MaxAgents int `json:"maxAgents"`
	// Window is the idle measurement's length, after Settle.
	Window Seconds `json:"window"`
	Settle Seconds `json:"settle"`
	// CPU is the processes' CPU time over the window, summed, as a
	// percentage of one core; PSS their memory at its end, summed, and
	// ShardPSS each one's (the default shard first).
	CPU      float64 `json:"cpuPercent"`
	PSS      int64   `json:"pss"`
	MaxPSS   int64   `json:"maxPSS"`
	ShardPSS []int64 `json:"shardPSS"`
	// RequestsPerMinute are the processes' API requests per minute, summed.
	RequestsPerMinute float64 `json:"requestsPerMinute"`
}

// ScaleRecord is what `make bench-scale` measured: figure 7 of
// docs/benchmarks.md. It is committed (results/scale.json), so that every
// render of the document, from any run, keeps it.
type ScaleRecord struct {
	Machine Machine `json:"machine"`
	// IdleAfter is the operators' --idle-after.
	IdleAfter Seconds       `json:"idleAfter"`
	Results   []ScaleResult `json:"results"`
	Took      Seconds       `json:"took"`
	// Bursts are the bursts of new Stacks under shards
	// (TestBenchShardBurst), measured on BurstsMachine; absent until
	// measured.
	Bursts        []ShardBurstResult `json:"bursts,omitempty"`
	BurstsMachine *Machine           `json:"burstsMachine,omitempty"`
	// ConfigBurst is the burst of config changes on one operator holding
	// the Stacks (TestBenchConfigBurst), measured on ConfigBurstMachine;
	// absent until measured.
	ConfigBurst        *ConfigBurstResult `json:"configBurst,omitempty"`
	ConfigBurstMachine *Machine           `json:"configBurstMachine,omitempty"`
}

// scaleFile is the committed record of the scale figure.
func scaleFile() string {
	return filepath.Join(testenv.RepoRoot(), "test", "bench", "results", "scale.json")
}

// TestBenchScale measures figure 7: N deployed Stacks (BENCH_SCALE_N,
// default 10000) under one operator and under shards (BENCH_SHARDS,
// default "1 2 4"), each idle for BENCH_IDLE_FOR. It writes
// results/scale.json and the figure's section of docs/benchmarks.md.
func TestBenchScale(t *testing.T) {
	// The API server's warnings (finalizer names) would go to a logger
	// nobody set.
	log.SetLogger(logr.Discard())
	began := time.Now()
	machine := machineFacts()
	idleAfter := durationEnv(t, envIdleAfter, 10*time.Second)
	h := startHarness(t, idleAfter)
	rec := &ScaleRecord{Machine: machine, IdleAfter: Sec(idleAfter)}
	n := intsEnv(t, envScaleN, []int{10000})[0]
	rec.Results = benchScale(t, h, n, intsEnv(t, envShards, []int{1, 2, 4}), durationEnv(t, envIdleFor, 2*time.Minute))
	rec.Took = Sec(time.Since(began))
	if prev := readScale(); prev != nil {
		// The bursts are measured by benches of their own, on the
		// machines their records name: keep them.
		rec.Bursts, rec.BurstsMachine = prev.Bursts, prev.BurstsMachine
		rec.ConfigBurst, rec.ConfigBurstMachine = prev.ConfigBurst, prev.ConfigBurstMachine
	}
	rec.Machine.LoadAfter = loadavg()
	if err := saveScale(rec); err != nil {
		t.Fatal(err)
	}
}

// saveScale writes rec to the committed record and renders figure 7 from
// it.
func saveScale(rec *ScaleRecord) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(scaleFile(), append(data, '\n'), 0o644); err != nil {
		return err
	}
	return writeScaleSection(rec)
}

// TestBenchScaleRender writes figure 7 of docs/benchmarks.md again from
// results/scale.json, for changes to its wording.
func TestBenchScaleRender(t *testing.T) {
	rec := readScale()
	if rec == nil {
		t.Fatalf("no record at %s: run make bench-scale", scaleFile())
	}
	if err := writeScaleSection(rec); err != nil {
		t.Fatal(err)
	}
}

// writeScaleSection puts figure 7, rendered from rec, in place in
// docs/benchmarks.md, leaving the other figures as they are.
func writeScaleSection(rec *ScaleRecord) error {
	doc, err := os.ReadFile(docFile())
	if err != nil {
		return err
	}
	var b strings.Builder
	renderScale(&b, rec)
	return os.WriteFile(docFile(), []byte(spliceSection(string(doc), scaleHeading, b.String(), fixesHeading)), 0o644)
}

// readScale reads the committed scale record; nil when there is none.
func readScale() *ScaleRecord {
	data, err := os.ReadFile(scaleFile())
	if err != nil {
		return nil
	}
	var rec ScaleRecord
	if json.Unmarshal(data, &rec) != nil {
		return nil
	}
	return &rec
}

// spliceSection replaces, in doc, the section that starts with heading
// (up to the next "## " heading) by section; without one it puts section
// before the heading before.
func spliceSection(doc, heading, section, before string) string {
	if i := strings.Index(doc, heading); i >= 0 {
		end := len(doc)
		if j := strings.Index(doc[i+len(heading):], "\n## "); j >= 0 {
			end = i + len(heading) + j + 1
		}
		return doc[:i] + section + doc[end:]
	}
	if i := strings.Index(doc, before); i >= 0 {
		return doc[:i] + section + doc[i:]
	}
	return doc + "\n" + section
}

// scaleNamespace holds the scale figure's Stacks.
const scaleNamespace = "scale"

// benchScale seeds n deployed Stacks (seedScale) and, for each count of
// shards, starts that many operators on them and measures the restart and
// the idle cost.
func benchScale(t *testing.T, h *harness, n int, shardCounts []int, window time.Duration) []ScaleResult {
	ctx := context.Background()
	seedScale(t, h, n)
	var results []ScaleResult
	bin, err := testenv.BuildStackyard(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range shardCounts {
		began := time.Now()
		if err := inParallel(n, 16, func(i int) error { return labelShard(ctx, h.client, stackName(i), shardOf(i, k)) }); err != nil {
			t.Fatal(err)
		}
		t.Logf("scale: labelled %d Stacks for %d shards in %s", n, k, time.Since(began).Round(time.Second))
		results = append(results, measureShards(t, h, bin, n, k, window))
	}
	return results
}

// seedScale makes n deployed Stacks in scaleNamespace. The harness's own
// operator deploys one Stack for real, whose status and Workspace are the
// model of the n: each is what the operator itself wrote for a Stack of
// the same spec, so that an operator started on them finds nothing to do,
// as after a restart. The harness's operator is stopped for good: the
// figures that seed come last.
func seedScale(t *testing.T, h *harness, n int) {
	ctx := context.Background()
	h.createNamespace(t, scaleNamespace)
	model := h.stack(scaleNamespace, "model", "scale", "hello")
	if err := h.client.Create(ctx, model); err != nil {
		t.Fatal(err)
	}
	if !waitFor(5*time.Minute, func() bool { _, ok := h.rec.readyAfter(scaleNamespace+"/model", 1, ""); return ok }) {
		t.Fatalf("the model Stack was not Ready within 5 minutes: %v", h.rec.failures(scaleNamespace))
	}
	// Its Workspace goes idle, and the Stack and Workspace stop changing.
	time.Sleep(h.idleAfter + 5*time.Second)
	if err := h.op.Stop(); err != nil {
		t.Fatal(err)
	}
	var ms pulumiv1.Stack
	var mw autov1alpha1.Workspace
	if err := h.client.Get(ctx, client.ObjectKeyFromObject(model), &ms); err != nil {
		t.Fatal(err)
	}
	if err := h.client.Get(ctx, client.ObjectKey{Namespace: scaleNamespace, Name: "model"}, &mw); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := inParallel(n, 16, func(i int) error {
		return seedStack(ctx, h.client, &ms, &mw, scaleNamespace, stackName(i), ms.Spec.Stack)
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("scale: seeded %d deployed Stacks in %s", n, time.Since(began).Round(time.Second))
}

func stackName(i int) string { return fmt.Sprintf("s%05d", i) }

// shardOf is the shard Stack i belongs to among k: "" (the default) or
// s1 … s<k-1>, round robin.
func shardOf(i, k int) string {
	if j := i % k; j > 0 {
		return "s" + strconv.Itoa(j)
	}
	return ""
}

// shardNames are the named shards of k.
func shardNames(k int) []string {
	var names []string
	for j := 1; j < k; j++ {
		names = append(names, "s"+strconv.Itoa(j))
	}
	return names
}

// seedStack creates the Stack namespace/name with the model's spec and
// status, and its Workspace with the model Workspace's spec, annotations
// and status; both name Pulumi stack pulumiStack.
func seedStack(ctx context.Context, c client.Client, ms *pulumiv1.Stack, mw *autov1alpha1.Workspace, namespace, name, pulumiStack string) error {
	s := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Finalizers: ms.Finalizers}, Spec: *ms.Spec.DeepCopy()}
	s.Spec.Stack = pulumiStack
	if err := c.Create(ctx, s); err != nil {
		return err
	}
	s.Status = *ms.Status.DeepCopy()
	s.Status.ObservedGeneration = s.Generation
	if err := c.Status().Update(ctx, s); err != nil {
		return err
	}
	// Applied as the Stack controller applies it, so that it is that
	// controller's, as a Workspace it made before a restart is.
	w := &autov1alpha1.Workspace{TypeMeta: metav1.TypeMeta{APIVersion: autov1alpha1.GroupVersion.String(), Kind: "Workspace"}, ObjectMeta: metav1.ObjectMeta{
		Namespace: namespace, Name: name, Finalizers: mw.Finalizers,
		Labels: map[string]string{stackrun.StackNameLabel: name}, Annotations: mw.Annotations,
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: pulumiv1.GroupVersion.String(), Kind: "Stack", Name: name, UID: s.UID,
			Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true),
		}},
	}, Spec: *mw.Spec.DeepCopy()}
	for i := range w.Spec.Stacks {
		w.Spec.Stacks[i].Name = pulumiStack
	}
	if err := c.Patch(ctx, w, client.Apply, client.FieldOwner(stack.FieldManager), client.ForceOwnership); err != nil {
		return err
	}
	w.Status = *mw.Status.DeepCopy()
	w.Status.ObservedGeneration = w.Generation
	return c.Status().Update(ctx, w)
}

func ptrTo[T any](v T) *T { return &v }

// labelShard gives the Stack name and its Workspace the shard label
// value ("" removes it).
func labelShard(ctx context.Context, c client.Client, name, value string) error {
	for _, obj := range []client.Object{&pulumiv1.Stack{}, &autov1alpha1.Workspace{}} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: scaleNamespace, Name: name}, obj); err != nil {
			return err
		}
		if obj.GetLabels()[shard.Label] == value {
			continue
		}
		base := obj.DeepCopyObject().(client.Object)
		l := obj.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		if value == "" {
			delete(l, shard.Label)
		} else {
			l[shard.Label] = value
		}
		obj.SetLabels(l)
		if err := c.Patch(ctx, obj, client.MergeFrom(base)); err != nil {
			return err
		}
	}
	return nil
}

// measureShards starts k operators (the default shard and k-1 named ones)
// on the n seeded Stacks, times them to every object reconciled, then
// measures them idle over window.
func measureShards(t *testing.T, h *harness, bin string, n, k int, window time.Duration) ScaleResult {
	ctx := context.Background()
	names := shardNames(k)
	ops := make([]*testenv.Operator, k)
	// What each shard's controllers reconcile at start: the default shard
	// caches every Stack (and returns at once for other shards'), the
	// named ones their own; each caches its own Workspaces.
	wantStacks, wantWorkspaces := make([]float64, k), make([]float64, k)
	for i := 0; i < n; i++ {
		j := i % k
		wantWorkspaces[j]++
		wantStacks[j]++
	}
	wantStacks[0] = float64(n) + 1 // the model Stack too
	wantWorkspaces[0]++
	start := time.Now()
	for j := 0; j < k; j++ {
		args := []string{"--idle-after", h.idleAfter.String()}
		if len(names) > 0 {
			args = append(args, "--shards", strings.Join(names, ","))
		}
		if j > 0 {
			args = append(args, "--shard", names[j-1])
		} else {
			// For a look at where the default shard's time goes.
			pprof := testenv.FreeAddr(t)
			args = append(args, "--pprof-bind-address", pprof)
			t.Logf("scale: %d shards: the default shard's profiles at http://%s/debug/pprof/", k, pprof)
		}
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("shard-%d", j))
		ops[j] = testenv.StartOperator(t, testenv.OperatorOptions{Bin: bin, Dir: dir, Config: h.env.Config, Args: args})
	}
	defer func() {
		for _, op := range ops {
			_ = op.Stop()
		}
	}()
	pids := func() []int {
		var p []int
		for _, op := range ops {
			p = append(p, op.Pid())
		}
		return p
	}
	res := ScaleResult{Shards: k, Stacks: n}
	done := waitFor(30*time.Minute, func() bool {
		for _, p := range pids() {
			res.MaxAgents = max(res.MaxAgents, agents(p))
		}
		for j, op := range ops {
			if metric(op, "controller_runtime_reconcile_total", `controller="stack"`) < wantStacks[j] ||
				metric(op, "controller_runtime_reconcile_total", `controller="workspace"`) < wantWorkspaces[j] ||
				metric(op, "workqueue_depth", `name="stack"`) != 0 || metric(op, "workqueue_depth", `name="workspace"`) != 0 {
				return false
			}
		}
		return true
	})
	res.Restart = Sec(time.Since(start))
	if !done {
		t.Fatalf("%d shards: not every Stack reconciled within 30 minutes", k)
	}
	for _, op := range ops {
		v, err := op.Metric("rest_client_requests_total")
		if err != nil {
			t.Fatal(err)
		}
		res.RestartRequests += v
	}
	t.Logf("scale: %d shards reconciled %d Stacks in %.1fs with %.0f API requests", k, n, res.Restart, res.RestartRequests)

	settle := 15 * time.Second
	time.Sleep(settle)
	res.Settle, res.Window = Sec(settle), Sec(window)
	cpu0, reqs0 := int64(0), 0.0
	for _, p := range pids() {
		st, _ := readStat(p)
		cpu0 += st.cpu
	}
	for _, op := range ops {
		v, _ := op.Metric("rest_client_requests_total")
		reqs0 += v
	}
	began := time.Now()
	for time.Since(began) < window {
		time.Sleep(time.Second)
		res.MaxPSS = max(res.MaxPSS, readMemory(pids()).PSS)
		for _, p := range pids() {
			res.MaxAgents = max(res.MaxAgents, agents(p))
		}
	}
	elapsed := time.Since(began)
	cpu1, reqs1 := int64(0), 0.0
	for _, p := range pids() {
		st, _ := readStat(p)
		cpu1 += st.cpu
		res.ShardPSS = append(res.ShardPSS, readMemory([]int{p}).PSS)
	}
	for _, op := range ops {
		v, err := op.Metric("rest_client_requests_total")
		if err != nil {
			t.Fatal(err)
		}
		reqs1 += v
	}
	res.CPU = float64(cpu1-cpu0) / clockTicks / elapsed.Seconds() * 100
	res.PSS = readMemory(pids()).PSS
	res.RequestsPerMinute = (reqs1 - reqs0) / elapsed.Minutes()
	var updates autov1alpha1.UpdateList
	if err := h.client.List(ctx, &updates, client.InNamespace(scaleNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, u := range updates.Items {
		if u.Labels[stackrun.StackNameLabel] != "model" {
			res.Updates++
		}
	}
	t.Logf("scale: %+v", res)
	return res
}

// metric is op's metric name summed over the samples with label; -1
// when it cannot be read.
func metric(op *testenv.Operator, name, label string) float64 {
	v, err := op.MetricWith(name, label)
	if err != nil {
		return -1
	}
	return v
}
