package local

import (
	"bufio"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// agentMemory is what one running agent costs with an operation under way
// (the agent, the pulumi CLI, a language host and a provider), for the
// default bound.
const agentMemory = 256 << 20

// DefaultMaxAgents is the default bound on agents running at once: two per
// core the process may use (GOMAXPROCS, which follows a container's CPU
// limit), and no more than its memory holds at agentMemory each, at least
// one.
func DefaultMaxAgents() int {
	n := 2 * goruntime.GOMAXPROCS(0)
	if mem := memoryBytes(); mem > 0 {
		n = min(n, int(mem/agentMemory))
	}
	return max(n, 1)
}

// memoryBytes is the memory the operator may use: the machine's (MemTotal)
// or its cgroup's limit when lower, as in a container with a memory limit;
// 0 when unknown.
func memoryBytes() int64 {
	mem := readMemTotal("/proc/meminfo")
	for _, path := range cgroupMemoryFiles {
		if limit := readCgroupLimit(path); limit > 0 && (mem <= 0 || limit < mem) {
			mem = limit
		}
	}
	return mem
}

// cgroupMemoryFiles hold the memory limit of the process's cgroup, as a
// container sees it: cgroup v2's memory.max, then cgroup v1's.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// readMemTotal returns MemTotal from a meminfo file, or 0.
func readMemTotal(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return kib << 10
			}
		}
	}
	return 0
}

// readCgroupLimit returns the byte limit in a cgroup memory file, or 0 for
// none: the file missing, "max" (v2's no limit) or unreadable. cgroup v1
// says "no limit" with a huge number, which MemTotal then undercuts.
func readCgroupLimit(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v <= 0 {
		return 0
	}
	return v
}

// admission bounds how many agents run at once. A Workspace holds a place
// from the start of its agent until the agent is idled or deleted; one that
// finds every place taken waits in a queue, first come first served, so a
// burst of Stacks is worked through in order and none starves. Whoever
// frees a place wakes the Workspaces now first in line (notify). Places
// bound the operations too, since an agent runs one at a time.
type admission struct {
	max    int
	notify func(types.NamespacedName)

	mu      sync.Mutex
	holders map[types.NamespacedName]bool
	queue   []types.NamespacedName
}

func newAdmission(max int, notify func(types.NamespacedName)) *admission {
	return &admission{max: max, notify: notify, holders: map[types.NamespacedName]bool{}}
}

// acquire gives key a place, or queues it. It returns whether key holds a
// place, and otherwise how many wait ahead of it. A key that already holds
// one keeps it. When the line starts (key is the first to wait), the
// holders are woken: an idle agent gives its place up at once while others
// wait, and a busy one looks at the line again when its work ends. Waking
// them for every later arrival would cost a reconcile of each holder per
// Workspace of a burst, and tell them nothing new.
func (a *admission) acquire(key types.NamespacedName) (bool, int) {
	if a.max <= 0 {
		return true, 0
	}
	a.mu.Lock()
	if a.holders[key] {
		a.mu.Unlock()
		return true, 0
	}
	free := a.max - len(a.holders)
	pos := slices.Index(a.queue, key)
	ahead := pos
	if pos < 0 {
		ahead = len(a.queue)
	}
	if ahead < free {
		if pos >= 0 {
			a.queue = slices.Delete(a.queue, pos, pos+1)
		}
		a.holders[key] = true
		a.mu.Unlock()
		return true, 0
	}
	var wake []types.NamespacedName
	if pos < 0 {
		a.queue = append(a.queue, key)
		if len(a.queue) == 1 {
			for h := range a.holders {
				wake = append(wake, h)
			}
		}
	}
	a.mu.Unlock()
	a.wake(wake)
	return false, ahead
}

// release gives key's place up (or its place in the queue), and wakes the
// Workspaces that may now take a place.
func (a *admission) release(key types.NamespacedName) {
	if a.max <= 0 {
		return
	}
	a.mu.Lock()
	held := a.holders[key]
	delete(a.holders, key)
	if pos := slices.Index(a.queue, key); pos >= 0 {
		a.queue = slices.Delete(a.queue, pos, pos+1)
	}
	// Whoever is now within reach of a free place is woken, whether key
	// held one or only left the line ahead of them.
	var wake []types.NamespacedName
	if free := a.max - len(a.holders); free > 0 && (held || len(a.queue) > 0) {
		wake = slices.Clone(a.queue[:min(free, len(a.queue))])
	}
	a.mu.Unlock()
	a.wake(wake)
}

func (a *admission) wake(keys []types.NamespacedName) {
	if a.notify == nil {
		return
	}
	for _, k := range keys {
		go a.notify(k)
	}
}

// counts returns how many agents hold a place and how many wait.
func (a *admission) counts() (running, queued int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.holders), len(a.queue)
}

var agentsDesc = prometheus.NewDesc("stackyard_local_agents",
	"Workspace agents of the local runtime: running (holding one of --max-agents places) or queued for a place.",
	[]string{"state"}, nil)

// agentsCollector reports the admission's counts as a metric.
type agentsCollector struct{ a *admission }

func (c agentsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- agentsDesc }

func (c agentsCollector) Collect(ch chan<- prometheus.Metric) {
	running, queued := c.a.counts()
	ch <- prometheus.MustNewConstMetric(agentsDesc, prometheus.GaugeValue, float64(running), "running")
	ch <- prometheus.MustNewConstMetric(agentsDesc, prometheus.GaugeValue, float64(queued), "queued")
}
