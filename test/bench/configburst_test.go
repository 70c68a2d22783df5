//go:build bench

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/agent/server"
	"github.com/stackyard/stackyard/test/testenv"
)

// envConfigBurstN is how many of the Stacks change their config at once.
const envConfigBurstN = "BENCH_CONFIG_BURST_N"

// envConfigFloorN caps how many of the changes the floor makes by hand;
// beyond it the floor is scaled.
const envConfigFloorN = "BENCH_CONFIG_FLOOR_N"

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
	// change, at FloorParallelism: FloorN of them run, and their time and
	// CPU scaled to N (FloorN 0: all N ran).
	Floor            Seconds `json:"floor"`
	FloorParallelism int     `json:"floorParallelism"`
	FloorN           int     `json:"floorN,omitempty"`
	// FloorStacks is how many stacks the floor's backend held (0: FloorN,
	// or N when FloorN is 0).
	FloorStacks int     `json:"floorStacks,omitempty"`
	Ratio       float64 `json:"ratio"`
	// CPU is the operator's process tree's processor time during the
	// burst, ControlPlane kube-apiserver's and etcd's; FloorCPU the bare
	// CLI's.
	CPU          Seconds `json:"cpu"`
	ControlPlane Seconds `json:"controlPlane"`
	// OperatorCPU is the operator process's own part of CPU, without its
	// agents and their Pulumi processes.
	OperatorCPU Seconds `json:"operatorCPU,omitempty"`
	FloorCPU    Seconds `json:"floorCPU"`
	PeakPSS     int64   `json:"peakPSS"`
	MaxAgents   int     `json:"maxAgents"`
	// Requests are the API requests per changed Stack during the burst.
	Requests map[string]float64 `json:"requests,omitempty"`
}

// TestBenchConfigBurst measures the config-change part of figure 7: one
// operator holding BENCH_SCALE_N Stacks (default 10000), nothing due,
// BENCH_CONFIG_BURST_N of them (default 10000) each its own deployed
// Pulumi stack, whose config then changes at once. The floor makes
// BENCH_CONFIG_FLOOR_N of the changes by hand (default 1000). It adds the
// result to results/scale.json and renders figure 7 again.
func TestBenchConfigBurst(t *testing.T) {
	log.SetLogger(logr.Discard())
	rec := readScale()
	if rec == nil {
		t.Fatalf("no record at %s: run make bench-scale first", scaleFile())
	}
	h := startHarness(t, durationEnv(t, envIdleAfter, 10*time.Second))
	total := intsEnv(t, envScaleN, []int{10000})[0]
	n := intsEnv(t, envConfigBurstN, []int{10000})[0]
	floorN := min(n, intsEnv(t, envConfigFloorN, []int{1000})[0])
	res := configBurst(t, h, total, n, floorN)
	rec.ConfigBurst = &res
	rec.ConfigBurstMachine = ptrTo(machineFacts())
	if err := saveScale(rec); err != nil {
		t.Fatal(err)
	}
}

// configModel names the Stack, and its Pulumi stack, that the changed
// Stacks of a config burst are cloned from.
const configModel = "cmodel"

// configBurst seeds total-n idle Stacks and n deployed ones, each its own
// Pulumi stack (seedConfigBurst), starts one operator on them all, then
// changes the n Stacks' config at once and times them to Ready; then the
// floor, on floorN of the n.
func configBurst(t *testing.T, h *harness, total, n, floorN int) ConfigBurstResult {
	ctx := context.Background()
	h.createNamespace(t, configBurstNamespace)
	backend := freshBackend(t)
	model := h.stack(configBurstNamespace, configModel, configModel, "hello")
	model.Spec.Backend = "file://" + backend
	if err := h.client.Create(ctx, model); err != nil {
		t.Fatal(err)
	}
	if _, found := h.rec.waitReady([]string{configBurstNamespace + "/" + configModel}, 1, nil); found != 1 {
		t.Fatalf("the model Stack was not deployed: %v", h.rec.failures(configBurstNamespace))
	}
	// Seeding lets the model's agent idle, as a change made later would
	// find it, and stops the harness's operator; a new one, built from
	// this tree, holds every Stack.
	modelState := h.op.StateDir
	seedScale(t, h, total-n)
	stateDir := filepath.Join(t.TempDir(), "operator")
	last := seedConfigBurst(t, h, backend, modelState, stateDir, n)
	bin, err := testenv.BuildStackyard(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	op := testenv.StartOperator(t, testenv.OperatorOptions{Bin: bin, Dir: t.TempDir(), StateDir: stateDir, Config: h.env.Config,
		Args: append([]string{"--idle-after", h.idleAfter.String()}, extraOperatorArgs()...)})
	defer func() { _ = op.Stop() }()
	settled := func() bool {
		return metric(op, "workqueue_depth", `name="stack"`) == 0 && metric(op, "workqueue_depth", `name="workspace"`) == 0
	}
	if !waitFor(10*time.Minute, settled) {
		t.Fatal("the operator did not settle on the seeded Stacks")
	}
	keys := stackKeys(configBurstNamespace, "c", n)
	deployed := make([]string, n)
	for i := range deployed {
		deployed[i] = last
	}

	sampler := startSampler(op.Pid(), 500*time.Millisecond)
	op0, cp0, own0 := treeCPU(tree(op.Pid())), controlPlaneCPU(), ownCPU(op.Pid())
	req0, err := h.apiRequests()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := inParallel(n, 16, func(i int) error { return changeMessage(ctx, h.client, fmt.Sprintf("c%04d", i), "changed") }); err != nil {
		t.Fatal(err)
	}
	marks, found := h.rec.waitReady(keys, 2, deployed)
	res := ConfigBurstResult{Stacks: total, N: n, CPU: tickSeconds(treeCPU(tree(op.Pid())) - op0),
		ControlPlane: tickSeconds(controlPlaneCPU() - cp0), OperatorCPU: tickSeconds(ownCPU(op.Pid()) - own0), FloorParallelism: configFloorParallelism, FloorN: floorN}
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

	floor, floorCPU, err := h.bareConfigBurst(t, backend, n, floorN)
	if err != nil {
		t.Fatal(err)
	}
	// The floor's runs are alike and independent, at a fixed parallelism:
	// its time and CPU grow in proportion to the changes.
	scale := float64(n) / float64(floorN)
	res.Floor, res.FloorCPU = Sec(time.Duration(float64(floor)*scale)), Seconds(float64(floorCPU)*scale)
	res.FloorStacks = n
	res.Ratio = float64(res.AllReady) / float64(res.Floor)
	t.Logf("config burst: %+v", res)
	return res
}

// seedConfigBurst makes n deployed Stacks c0000 … in configBurstNamespace,
// each its own Pulumi stack on backend, cloned from the model Stack: its
// checkpoint and the file it wrote under the new stack's name, its
// status, its Workspace, and its Workspace's state directory from the
// operator state directory modelState into stateDir, the next operator's.
// It returns the last Update they all record. The harness's operator must
// be stopped, or it would deploy them.
func seedConfigBurst(t *testing.T, h *harness, backend, modelState, stateDir string, n int) string {
	ctx := context.Background()
	var ms pulumiv1.Stack
	var mw autov1alpha1.Workspace
	key := client.ObjectKey{Namespace: configBurstNamespace, Name: configModel}
	if err := h.client.Get(ctx, key, &ms); err != nil {
		t.Fatal(err)
	}
	if err := h.client.Get(ctx, key, &mw); err != nil {
		t.Fatal(err)
	}
	if ms.Status.LastUpdate == nil {
		t.Fatal("the model Stack records no Update")
	}
	began := time.Now()
	if err := inParallel(n, 16, func(i int) error {
		name := fmt.Sprintf("c%04d", i)
		if err := h.cloneDeployed(backend, backend, configModel, name); err != nil {
			return err
		}
		if err := cloneWorkspaceState(modelState, stateDir, "file://"+backend, configModel, name); err != nil {
			return err
		}
		return seedStack(ctx, h.client, &ms, &mw, configBurstNamespace, name, name)
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("config burst: seeded %d deployed Stacks in %s", n, time.Since(began).Round(time.Second))
	return ms.Status.LastUpdate.Name
}

// stateFile is Pulumi stack name's checkpoint on the file backend dir.
func stateFile(dir, name string) string {
	return filepath.Join(dir, ".pulumi", "stacks", project, name+".json")
}

// cloneDeployed makes Pulumi stack to, on the file backend dst, what
// deploying the program with from's config would have made of it: from's
// checkpoint on backend src with from's name renamed throughout (its URNs
// and the path of the file it wrote; the name is chosen to occur nowhere
// else), and a copy of that file. dst must be set up (prepareBackend).
func (h *harness) cloneDeployed(src, dst, from, to string) error {
	state, err := os.ReadFile(stateFile(src, from))
	if err != nil {
		return err
	}
	if err := os.WriteFile(stateFile(dst, to), bytes.ReplaceAll(state, []byte(from), []byte(to)), 0o644); err != nil {
		return err
	}
	content, err := os.ReadFile(filepath.Join(h.outDir, from+".txt"))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(h.outDir, to+".txt"), content, 0o644)
}

// cloneWorkspaceState copies the local runtime's state directory of
// Workspace from in configBurstNamespace, under the operator state
// directory src, to Workspace to's under dst: what the runtime leaves
// behind once to's agent has idled, each Workspace deploying the Pulumi
// stack of its name on backend. The running agent's token, pid and
// process registry stay behind; from's name is renamed in file names and,
// outside git's own files, in the contents (stack settings, the selected
// stack). What the agent carried over for the next one moves to the file
// the next agent of to looks for (server.CarriedFile).
func cloneWorkspaceState(src, dst, backend, from, to string) error {
	root := filepath.Join(src, "workspaces", configBurstNamespace, from)
	into := filepath.Join(dst, "workspaces", configBurstNamespace, to)
	carried := func(dir, stack string) string {
		return server.CarriedFile(filepath.Join(dir, "home"), backend, filepath.Join(dir, "source"), project, stack)
	}
	if err := copyRenamed(root, into, from, to); err != nil {
		return err
	}
	model := carried(root, from)
	state, err := os.ReadFile(model)
	if err != nil {
		return fmt.Errorf("the model Workspace's agent carried nothing over: %w", err)
	}
	if rel, err := filepath.Rel(root, model); err == nil {
		_ = os.Remove(filepath.Join(into, rel)) // the copy under the model's name
	}
	return os.WriteFile(carried(into, to), bytes.ReplaceAll(state, []byte(from), []byte(to)), 0o600)
}

// copyRenamed copies the tree root to into, with from renamed to in the
// paths and, outside git's own files, in the contents. The running
// agent's token, pid and process registry are left out.
func copyRenamed(root, into, from, to string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		switch rel {
		case "agent.token", "agent.pid", "processes":
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(into, strings.ReplaceAll(rel, from, to))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !slices.Contains(strings.Split(rel, string(filepath.Separator)), ".git") {
			data = bytes.ReplaceAll(data, []byte(from), []byte(to))
		}
		return os.WriteFile(target, data, info.Mode().Perm())
	})
}

// prepareBackend gives the empty file backend dst src's layout: its
// metadata (the project-scoped layout's version) and the project's
// stacks directory.
func prepareBackend(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(stateFile(dst, "x")), 0o755); err != nil {
		return err
	}
	meta, err := os.ReadFile(filepath.Join(src, ".pulumi", "meta.yaml"))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dst, ".pulumi", "meta.yaml"), meta, 0o644)
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

// bareConfigBurst is the floor of a config burst: stacks bare stacks are
// cloned from the model on backend (not timed), as many as the operator's
// backend holds, since the CLI slows as a file backend fills; then `pulumi
// up --config` changes the message of n of them, each with the stack
// config file `pulumi stack init` would have written,
// configFloorParallelism at a time (timed, with the CLI's CPU).
func (h *harness) bareConfigBurst(t *testing.T, backend string, stacks, n int) (time.Duration, Seconds, error) {
	floor := freshBackend(t)
	if err := prepareBackend(backend, floor); err != nil {
		return 0, 0, err
	}
	var model struct {
		Checkpoint struct {
			Latest struct {
				SecretsProviders struct {
					State struct {
						Salt string `json:"salt"`
					} `json:"state"`
				} `json:"secrets_providers"`
			} `json:"latest"`
		} `json:"checkpoint"`
	}
	state, err := os.ReadFile(stateFile(backend, configModel))
	if err != nil {
		return 0, 0, err
	}
	if err := json.Unmarshal(state, &model); err != nil {
		return 0, 0, err
	}
	stackConfig := []byte("encryptionsalt: " + model.Checkpoint.Latest.SecretsProviders.State.Salt + "\n")
	name := func(i int) string { return fmt.Sprintf("floor-%04d", i) }
	for i := range stacks {
		if err := h.cloneDeployed(backend, floor, configModel, name(i)); err != nil {
			return 0, 0, err
		}
		if i >= n {
			continue
		}
		if err := os.WriteFile(filepath.Join(h.progDir, "Pulumi."+name(i)+".yaml"), stackConfig, 0o644); err != nil {
			return 0, 0, err
		}
	}
	cpu0 := childCPU()
	start := time.Now()
	err = inParallel(n, configFloorParallelism, func(i int) error {
		_, err := pulumiOn(floor, h.progDir, "up", "--stack", name(i), "--yes", "--skip-preview",
			"--config", project+":message=changed")
		return err
	})
	return time.Since(start), tickSeconds(childCPU() - cpu0), err
}
