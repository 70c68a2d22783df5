//go:build bench

package bench

import (
	"context"
	"testing"
	"time"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// IdleResult is the operator's cost while Stacks sit Ready unchanged.
type IdleResult struct {
	Stacks int     `json:"stacks"`
	Window Seconds `json:"window"`
	// Settle is how long after the last Stack turned Ready (and the
	// others were deleted) the window started.
	Settle Seconds `json:"settle"`
	// CPU is the operator process's CPU time over the window, as a
	// percentage of one core; TreeCPU includes its descendants.
	CPU     float64 `json:"cpuPercent"`
	TreeCPU float64 `json:"treeCpuPercent"`
	// RSS and PSS are the operator process's, at the end of the window,
	// in bytes; MaxPSS is the largest seen over the window.
	RSS    int64 `json:"rss"`
	PSS    int64 `json:"pss"`
	MaxPSS int64 `json:"maxPSS"`
	// RequestsPerMinute are the operator's API requests
	// (rest_client_requests_total) per minute.
	RequestsPerMinute float64 `json:"requestsPerMinute"`
	// RefListsPerInterval and FetchesPerInterval are the git server's ref
	// listings and fetches of the one repository and branch every Stack
	// tracks, per 60 s poll interval.
	RefListsPerInterval float64 `json:"refListsPerInterval"`
	FetchesPerInterval  float64 `json:"fetchesPerInterval"`
	// Agents are the agents running at the end of the window; MaxAgents
	// the most seen during it.
	Agents    int `json:"agents"`
	MaxAgents int `json:"maxAgents"`
}

// pollInterval is the Stacks' git poll interval (resyncFrequencySeconds
// unset: 60 s).
const pollInterval = time.Minute

// benchIdle keeps only the Stacks of namespace keep and measures the
// operator over window once they have settled.
func benchIdle(t *testing.T, h *harness, keep string, window time.Duration) *IdleResult {
	ctx := context.Background()
	var all pulumiv1.StackList
	if err := h.client.List(ctx, &all); err != nil {
		t.Fatal(err)
	}
	stacks := 0
	for i := range all.Items {
		if all.Items[i].Namespace == keep {
			stacks++
			continue
		}
		if err := h.client.Delete(ctx, &all.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
	if !waitFor(5*time.Minute, func() bool {
		var l pulumiv1.StackList
		return h.client.List(ctx, &l) == nil && len(l.Items) == stacks
	}) {
		t.Fatal("the other Stacks were not gone within 5 minutes")
	}
	settle := h.idleAfter + 15*time.Second
	t.Logf("idle: %d Stacks kept; settling for %s", stacks, settle)
	time.Sleep(settle)

	pid := h.pid()
	st0, _ := readStat(pid)
	tree0 := treeCPU(tree(pid))
	reqs0, err := h.requestCount()
	if err != nil {
		t.Fatal(err)
	}
	git0 := h.git.Requests(project)
	start := time.Now()
	res := &IdleResult{Stacks: stacks, Window: Sec(window), Settle: Sec(settle)}
	for time.Since(start) < window {
		time.Sleep(time.Second)
		m := readMemory([]int{pid})
		res.MaxPSS = max(res.MaxPSS, m.PSS)
		res.MaxAgents = max(res.MaxAgents, agents(pid))
	}
	elapsed := time.Since(start)
	// The operator's own CPU is utime+stime only; the tree adds what its
	// live descendants used and what exited children left in cutime.
	st1, _ := readStat(pid)
	res.CPU = float64(st1.cpu-st0.cpu) / clockTicks / elapsed.Seconds() * 100
	res.TreeCPU = float64(treeCPU(tree(pid))-tree0) / clockTicks / elapsed.Seconds() * 100
	reqs1, err := h.requestCount()
	if err != nil {
		t.Fatal(err)
	}
	git1 := h.git.Requests(project)
	m := readMemory([]int{pid})
	res.RSS, res.PSS = m.RSS, m.PSS
	res.RequestsPerMinute = (reqs1 - reqs0) / elapsed.Minutes()
	intervals := elapsed.Seconds() / pollInterval.Seconds()
	res.RefListsPerInterval = float64(git1.RefLists-git0.RefLists) / intervals
	res.FetchesPerInterval = float64(git1.Fetches-git0.Fetches) / intervals
	res.Agents = agents(pid)
	t.Logf("idle: %+v", *res)
	return res
}
