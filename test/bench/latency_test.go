//go:build bench

package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// Phases of one update as the API shows them, in seconds from the patch.
var latencyPhases = []string{"patch→Update created", "created→InProgress", "InProgress→Complete", "Complete→Stack Ready"}

// LatencyResult is the added latency of one agent state (warm or cold).
type LatencyResult struct {
	// Agent is "warm" (the Workspace's agent running) or "cold" (idled
	// before the change).
	Agent string `json:"agent"`
	// Total is spec patched → Stack Ready, per repetition.
	Total Spread `json:"total"`
	// Bare is `pulumi up` of the same change by hand, same backend.
	Bare Spread `json:"bare"`
	// Added is Total minus Bare, per repetition.
	Added Spread `json:"added"`
	// Ratio is Total over Bare, per repetition.
	Ratio Spread `json:"ratio"`
	// Phases splits Total, per repetition, in the order of latencyPhases.
	Phases map[string]Spread `json:"phases"`
	// AgentStarts counts the repetitions during which a new agent
	// process started.
	AgentStarts int `json:"agentStarts"`
	// Commands are the Pulumi CLI commands the operator's tree ran during
	// the last repetition (polled every 50 ms: very short ones may be
	// missing).
	Commands []string `json:"commands"`
	// Samples are the raw totals and bares, in seconds.
	Samples [][2]float64 `json:"samples"`
}

// benchLatency changes a config value of one Ready Stack repeat times with
// the agent warm, then repeat times after the agent was idled, and times
// the same change made with the bare CLI after each.
func benchLatency(t *testing.T, h *harness, repeat int) []LatencyResult {
	const ns, name, stackName = "latency", "latency", "latency"
	h.createNamespace(t, ns)
	ctx := context.Background()
	stack := h.stack(ns, name, stackName, "v0")
	if err := h.client.Create(ctx, stack); err != nil {
		t.Fatal(err)
	}
	key := ns + "/" + name
	if !waitFor(5*time.Minute, func() bool { _, ok := h.rec.readyAfter(key, 1, ""); return ok }) {
		t.Fatalf("the latency Stack is not Ready after 5 minutes: %v", h.rec.failures(ns))
	}
	// The bare CLI's own stack on the same backend, with the same program.
	bare := "latency-bare"
	if _, err := h.bareUp(h.backend, bare); err != nil {
		t.Fatal(err)
	}

	var out []LatencyResult
	for _, agent := range []string{"warm", "cold"} {
		res := LatencyResult{Agent: agent, Phases: map[string]Spread{}}
		var totals, bares, added, ratios []float64
		phases := make([][]float64, len(latencyPhases))
		for i := 1; i <= repeat; i++ {
			if agent == "cold" {
				// Wait for the Workspace's agent to be idled away.
				if !waitFor(h.idleAfter+2*time.Minute, func() bool { return agents(h.pid()) == 0 }) {
					t.Fatalf("the agent is still running %s after the last update", h.idleAfter+2*time.Minute)
				}
			} else if agents(h.pid()) == 0 {
				t.Logf("warm repetition %d: no agent running", i)
			}
			msg := fmt.Sprintf("%s-%d", agent, i)
			before := map[int]bool{}
			for _, pid := range tree(h.pid()) {
				if isAgent(pid) {
					before[pid] = true
				}
			}
			cli := watchCLI(h.pid())
			split, total := h.changeAndWait(t, key, msg)
			commands, seen := cli.Stop()
			for pid := range seen {
				if !before[pid] {
					res.AgentStarts++
					break
				}
			}
			res.Commands = commands
			if err := h.setConfig(bare, msg); err != nil {
				t.Fatal(err)
			}
			b, err := h.pulumi("up", "--stack", bare, "--yes", "--skip-preview")
			if err != nil {
				t.Fatal(err)
			}
			totals = append(totals, total.Seconds())
			bares = append(bares, b.Seconds())
			added = append(added, (total - b).Seconds())
			ratios = append(ratios, total.Seconds()/b.Seconds())
			for j, d := range split {
				phases[j] = append(phases[j], d.Seconds())
			}
			res.Samples = append(res.Samples, [2]float64{total.Seconds(), b.Seconds()})
			t.Logf("%s %d: stackyard %.2fs (%v), bare pulumi up %.2fs; commands %q", agent, i, total.Seconds(), split, b.Seconds(), commands)
		}
		res.Total, res.Bare, res.Added, res.Ratio = spreadOf(totals), spreadOf(bares), spreadOf(added), spreadOf(ratios)
		for j, p := range latencyPhases {
			res.Phases[p] = spreadOf(phases[j])
		}
		out = append(out, res)
	}
	return out
}

// changeAndWait patches the Stack's message config value and returns the
// phase split and the total time until the Stack is Ready with an Update
// that ran after the patch.
func (h *harness) changeAndWait(t *testing.T, key, message string) ([]time.Duration, time.Duration) {
	t.Helper()
	ctx := context.Background()
	var stack pulumiv1.Stack
	ns, name := splitKey(key)
	if err := h.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &stack); err != nil {
		t.Fatal(err)
	}
	prev := ""
	if stack.Status.LastUpdate != nil {
		prev = stack.Status.LastUpdate.Name
	}
	patch := client.MergeFrom(stack.DeepCopy())
	stack.Spec.Config[project+":message"] = jsonString(message)
	start := time.Now()
	if err := h.client.Patch(ctx, &stack, patch); err != nil {
		t.Fatal(err)
	}
	var mark readyMark
	if !waitFor(5*time.Minute, func() bool { var ok bool; mark, ok = h.rec.readyAfter(key, stack.Generation, prev); return ok }) {
		t.Fatalf("Stack %s not Ready again 5 minutes after the change: %v", key, h.rec.failures(ns))
	}
	created, started, complete, failure := h.rec.updateTimes(ns + "/" + mark.lastUpdate)
	if failure != "" {
		t.Fatalf("Update %s failed: %s", mark.lastUpdate, failure)
	}
	if started.IsZero() {
		// No event showed InProgress (it was overwritten before a watch
		// event carried it): count that phase as zero.
		started = created
	}
	split := []time.Duration{created.Sub(start), started.Sub(created), complete.Sub(started), mark.at.Sub(complete)}
	return split, mark.at.Sub(start)
}

// setConfig sets the message config value of the bare CLI's stack.
func (h *harness) setConfig(stackName, message string) error {
	_, err := h.pulumi("config", "set", "--stack", stackName, project+":message", message)
	return err
}

// splitKey splits "namespace/name".
func splitKey(key string) (string, string) {
	for i := range key {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}
