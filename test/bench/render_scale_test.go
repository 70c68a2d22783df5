//go:build bench

package bench

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// Figure 7 (make bench-scale, bench-shard-burst, bench-config-burst)
// renders from its own record, results/scale.json, apart from the other
// figures.

// The headings renderScale and renderFixes start with, which
// TestBenchScale finds to put figure 7 in place.
const (
	scaleHeading = "## 7. Scale: 10,000 Stacks and shards"
	fixesHeading = "## Fixes the figures called for"
)

// Targets of the scale figure (issue 23).
const (
	targetScaleCPU = 5.0  // percent of a core, idle
	targetScaleMiB = 1024 // MiB, idle
)

// renderScale writes figure 7 from its record (make bench-scale).
func renderScale(b *strings.Builder, rec *ScaleRecord) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("%s\n\n", scaleHeading)
	if len(rec.Results) == 0 {
		p("Not measured.\n\n")
		return
	}
	m := rec.Machine
	n := rec.Results[0].Stacks
	var counts []string
	for _, r := range rec.Results {
		counts = append(counts, strconv.Itoa(r.Shards))
	}
	p("Command: `make bench-scale BENCH_SCALE_N=%d BENCH_SHARDS='%s'` (test/bench/scale_test.go; %s on\n", n, strings.Join(counts, " "), minutes(float64(rec.Took)))
	p("%d cores, commit `%s`, %s; its record is `test/bench/results/scale.json`).\n\n", m.Cores, m.Commit, m.Date)
	p("%d Stacks deployed before the operator starts, as after a restart or an upgrade: one Stack is\n", n)
	p("deployed for real, and the others are made with its spec, its status and its Workspace (spec,\n")
	p("annotations, status), so each operator finds what it would have written itself and nothing due.\n")
	p("Then, for each shard count, that many `stackyard operator` processes (the default shard and named\n")
	p("ones, `--shards`/`--shard`, local runtime, `--idle-after %s`) start on the same control plane, the\n", secs(float64(rec.IdleAfter)))
	p("Stacks and their Workspaces labelled round robin. **Restart** is the time until every shard's Stack\n")
	p("and Workspace controllers have reconciled every object they watch and their queues are empty (from\n")
	p("`controller_runtime_reconcile_total` and `workqueue_depth`); then, after 15 s, the processes are\n")
	p("watched idle. CPU, memory and API requests are the processes' together. The processes run without\n")
	p("leader election; with it (the chart's default) each shard's leader also renews its Lease every 2 s\n")
	p("(controller-runtime's retry period), one UPDATE each: 30 more requests a minute per shard.\n\n")
	p("| Shards | Restart | API requests in it | Idle CPU | Idle memory (PSS) | per shard | API requests per minute | Updates, agents started |\n")
	p("|---|---|---|---|---|---|---|---|\n")
	for _, r := range rec.Results {
		var per []string
		for _, v := range r.ShardPSS {
			per = append(per, mib(v))
		}
		p("| %d | %.1f s | %.0f | %.2f %% of a core | %s (max %s) | %s | %.0f | %d, %d |\n",
			r.Shards, float64(r.Restart), r.RestartRequests, r.CPU, mib(r.PSS), mib(r.MaxPSS), strings.Join(per, ", "), r.RequestsPerMinute, r.Updates, r.MaxAgents)
	}
	p("\n")
	if one := rec.Results[0]; one.Shards == 1 {
		p("- One operator, %d Stacks: idle CPU %.2f %% of a core (target < %.0f %%: %s), memory %s (target\n",
			n, one.CPU, targetScaleCPU, yes(one.CPU < targetScaleCPU), mib(one.PSS))
		p("  < %d MiB: %s); a restart reconciles them all in %.1f s, running %d Updates and starting %d\n",
			targetScaleMiB, yes(one.PSS < targetScaleMiB<<20), float64(one.Restart), one.Updates, one.MaxAgents)
		p("  agents.\n")
	}
	p("- The first run of this figure, on commit `da56cee`, found a restart sending one server-side apply\n")
	p("  per Stack (10,020 requests, 104.8 s) and idle resyncs at 7.32 %% of a core: each rebuilt, encoded\n")
	p("  and compared its Workspace once a minute. Since `9e34cde` a Workspace that stackyard applied and\n")
	p("  that already holds what an apply would send is not applied again, and a resync whose Stack,\n")
	p("  resolved source and Workspace have not changed builds nothing. That left 4.70 %% of a core\n")
	p("  (measured on `9e34cde`), mostly controller-runtime's per-reconcile logger, the deep copy of\n")
	p("  each Stack read from the cache, and the garbage collector (a 60 s CPU profile of the\n")
	p("  one-operator window, through `--pprof-bind-address`): every Stack was still reconciled once a\n")
	p("  minute, only to ask whether its branch had moved. Since `642ab62` the branch watch asks once\n")
	p("  per branch and wakes only the Stacks it moved for, and a Ready Stack whose source wakes it\n")
	p("  looks again after 10 minutes (±5 %%). The window above falls between those looks: averaged\n")
	p("  over the 10 minutes, the same reconciles cost a tenth of the 4.70 %%, about 0.5 %% of a core,\n")
	p("  gathered in the minute they fall due (extrapolated, not measured).\n")
	if rec.ConfigBurst == nil {
		p("- Not measured here: a burst of 10,000 config changes. It runs 10,000 real updates, about the\n")
		p("  burst figure's N = 1,000 ten times over, which is hours on these 2 cores.\n")
	}
	p("- On one machine, shards share its cores: they divide the reconciles, not the CPU that the\n")
	p("  reconciles and the control plane need. Each shard holds its own caches, and the default\n")
	p("  shard caches every Stack (pipelines and the dashboard read them), so memory grows with the\n")
	p("  number of shards. See docs/sharding.md, \"When to shard\".\n\n")
	renderShardBursts(b, rec)
	renderConfigBurst(b, rec)
}

// renderShardBursts writes the bursts under shards of figure 7, when
// measured.
func renderShardBursts(b *strings.Builder, rec *ScaleRecord) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	if len(rec.Bursts) == 0 || rec.BurstsMachine == nil {
		p("Bursts under shards: not measured.\n\n")
		return
	}
	m := rec.BurstsMachine
	n := rec.Bursts[0].N
	var counts []string
	for _, r := range rec.Bursts {
		counts = append(counts, strconv.Itoa(r.Shards))
	}
	p("**Bursts under shards.** Command: `make bench-shard-burst BENCH_SHARD_BURST_N=%d BENCH_SHARDS='%s'`\n", n, strings.Join(counts, " "))
	p("(test/bench/shardburst_test.go; %d cores, commit `%s`, %s). For each count, that many operator\n", m.Cores, m.Commit, m.Date)
	p("processes start afresh, each with its own local agents at the default `--max-agents`, and %d new\n", n)
	p("Stacks of figure 2's program are created at once, labelled round robin over the shards; the time\n")
	p("runs from the first create to the last Stack Ready. CPU is the shards' process trees' together\n")
	p("(operators, agents, CLI, language hosts, providers), and the control plane's beside it.\n\n")
	p("| Shards | all Ready | median Ready | Update complete → Stack Ready (median, p90, max) | CPU, shards | CPU, control plane | peak PSS, summed | agents at once, summed |\n")
	p("|---|---|---|---|---|---|---|---|\n")
	for _, r := range rec.Bursts {
		lag := "–"
		if r.CompleteToReady != nil {
			lag = readyLag(*r.CompleteToReady)
		}
		p("| %d | %.1f s | %.1f s | %s | %.0f s | %.0f s | %s | %d |\n", r.Shards, float64(r.AllReady), float64(r.MedianReady),
			lag, float64(r.CPU), float64(r.ControlPlane), mib(r.PeakPSS), r.MaxAgents)
	}
	p("\n")
	for _, r := range rec.Bursts {
		if len(r.Requests) > 0 {
			total, _ := requestTotals(r.Requests)
			p("- %d shard(s): %.0f API requests per Stack (%s).\n", r.Shards, total, topRequests(r.Requests, 4))
		}
	}
	if one := rec.Bursts[0]; one.Shards == 1 {
		for _, r := range rec.Bursts[1:] {
			p("- %d shards: %.2f× the time of one operator, with %.2f× its CPU.\n", r.Shards,
				float64(r.AllReady)/float64(one.AllReady), float64(r.CPU+r.ControlPlane)/float64(one.CPU+one.ControlPlane))
		}
	}
	p("- \"Update complete → Stack Ready\" is how long a Stack whose Update has finished waits for its\n")
	p("  shard to say so. Each shard's default `--max-agents` counts the machine's cores, not its share\n")
	p("  of them, so more shards on one machine run more agents at once, and the operators get less of\n")
	p("  the cores: the wait grows with the shards. The reconciles that finish work go ahead of the\n")
	p("  burst's new objects in each controller's queue, which keeps nine in ten of these waits to\n")
	p("  seconds; the slowest is the table's max.\n")
	p("- A burst is bound by the processor time of its Pulumi runs (figure 2). On one machine, more\n")
	p("  shards cannot make that shorter: each runs its own agents, so more of them compete for the\n")
	p("  same cores. Shards pay off when they run on more machines: their Deployments' pods spread over\n")
	p("  the nodes (with the kubernetes runtime the workspace pods spread anyway, sharded or not).\n\n")
}

// renderConfigBurst writes the burst of config changes of figure 7, when
// measured.
func renderConfigBurst(b *strings.Builder, rec *ScaleRecord) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	r, m := rec.ConfigBurst, rec.ConfigBurstMachine
	if r == nil || m == nil {
		p("A burst of config changes: not measured.\n\n")
		return
	}
	command := fmt.Sprintf("make bench-config-burst BENCH_SCALE_N=%d BENCH_CONFIG_BURST_N=%d", r.Stacks, r.N)
	if r.FloorN != 0 {
		command += fmt.Sprintf(" BENCH_CONFIG_FLOOR_N=%d", r.FloorN)
	}
	p("**A burst of config changes.** Command: `%s`\n", command)
	p("(test/bench/configburst_test.go; %d cores, commit `%s`, %s). ", m.Cores, m.Commit, m.Date)
	if r.N < r.Stacks {
		p("One operator holds %d Stacks: %d seeded\n", r.Stacks, r.Stacks-r.N)
	}
	if r.FloorN == 0 {
		p("as above (nothing due), and %d deployed for real, each its own Pulumi stack on a file backend. Once\n", r.N)
		p("their agents have idled, the %d change their config at once; the time runs from the first change to\n", r.N)
		p("the last of them Ready with the change deployed. The floor is the same change made by hand to %d bare\n", r.N)
		p("stacks deployed beforehand, `pulumi up --config`, %d at a time.\n\n", r.FloorParallelism)
	} else {
		if r.N < r.Stacks {
			p("as above (nothing due), and %d deployed, each its own Pulumi stack on a file backend. ", r.N)
		} else {
			p("One operator holds %d deployed Stacks, each its own Pulumi stack on a file backend. ", r.N)
		}
		p("One Stack is\ndeployed for real and its agent idles; the %d are its clones, as %d deployments of the same spec would\n", r.N, r.N)
		p("leave them: its Pulumi checkpoint under each stack's name, its status, its Workspace, and its\n")
		p("Workspace's state directory on the operator's disk with what the agent carries over. Then the %d\n", r.N)
		p("change their config at once; the time runs from the first change to the last of them Ready with the\n")
		p("change deployed. The floor is the same change made by hand, `pulumi up --config`, %d at a time, to\n", r.FloorParallelism)
		p("%d bare stacks cloned the same way; its runs are alike and independent, so its time and CPU are\n", r.FloorN)
		p("scaled to %d (measured on %d, extrapolated).\n\n", r.N, r.FloorN)
	}
	total, _ := requestTotals(r.Requests)
	p("| Stacks held | changed | all Ready | median Ready | floor | ratio | CPU, operator's tree | CPU, control plane | CPU, floor | peak PSS | agents at once | API requests per Stack |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	p("| %d | %d | %.1f s | %.1f s | %.1f s | %.2f× | %.0f s | %.0f s | %.0f s | %s | %d | %.0f |\n\n", r.Stacks, r.N,
		float64(r.AllReady), float64(r.MedianReady), float64(r.Floor), r.Ratio, float64(r.CPU), float64(r.ControlPlane),
		float64(r.FloorCPU), mib(r.PeakPSS), r.MaxAgents, total)
	if len(r.Requests) > 0 {
		p("- The API requests per changed Stack: %s.\n", topRequests(r.Requests, 5))
	}
	p("- The operator's tree used %.2f× the floor's CPU, and the control plane %.2f s of CPU per changed\n",
		float64(r.CPU)/float64(r.FloorCPU), float64(r.ControlPlane)/float64(r.N))
	p("  Stack on the same cores, which the floor does not pay.\n")
	if r.OperatorCPU > 0 {
		p("- Per changed Stack: the operator process %.3f s of CPU, its agents and their Pulumi processes\n",
			float64(r.OperatorCPU)/float64(r.N))
		p("  %.3f s, the control plane %.3f s; the floor's CLI %.3f s.\n", float64(r.CPU-r.OperatorCPU)/float64(r.N),
			float64(r.ControlPlane)/float64(r.N), float64(r.FloorCPU)/float64(r.N))
	}
	if held := cmp.Or(r.FloorStacks, r.FloorN, r.N); held < r.N {
		p("- The floor's backend held %d stacks, the operator's %d: the CLI slows as a file backend fills\n", held, r.N)
		p("  (figure 2), so the ratio above overstates what the operator adds by an amount this run did not\n")
		p("  measure. The bench now gives the floor a backend as full as the operator's; a rerun will say.\n")
	}
	if r.N < r.Stacks {
		p("- %d changes at once, not %d: each runs a real `pulumi up` (%.2f s of CPU by hand here), so all %d\n",
			r.N, r.Stacks, float64(r.FloorCPU)/float64(r.N), r.Stacks)
		p("  would take about %s at this pace (extrapolated, not measured). What the %d held Stacks cost a\n",
			minutes(float64(r.AllReady)/float64(r.N)*float64(r.Stacks)), r.Stacks)
		p("  burst (lists, indexes, queues, a larger API server) is in this one.\n")
	}
	p("\n")
}
