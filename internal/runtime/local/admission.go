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
//
// A burst of 10,000 Workspaces all wait at once, and each looks at the
// line on every reconcile: no call here walks it further than the free
// places. The line keeps its order as a slice of tickets; one who leaves it
// loses their ticket (waiting), and the entry left behind is dropped when
// it reaches the front or when such entries outnumber the living ones.
type admission struct {
	max    int
	notify func(types.NamespacedName)

	mu      sync.Mutex
	holders map[types.NamespacedName]bool
	waiting map[types.NamespacedName]uint64 // a queued key's ticket
	line    []ticket                        // in arrival order
	issued  uint64                          // the last ticket handed out
}

// ticket is one arrival in the line: it stands for key while waiting[key]
// is still n.
type ticket struct {
	key types.NamespacedName
	n   uint64
}

func newAdmission(max int, notify func(types.NamespacedName)) *admission {
	return &admission{max: max, notify: notify, holders: map[types.NamespacedName]bool{}, waiting: map[types.NamespacedName]uint64{}}
}

// acquire gives key a place, or queues it, and returns whether key holds a
// place. A key that already holds one keeps it; a queued key keeps its
// place in line. When the line starts (key is the first to wait), the
// holders are woken: an idle agent gives its place up at once while others
// wait, and a busy one looks at the line again when its work ends. Waking
// them for every later arrival would cost a reconcile of each holder per
// Workspace of a burst, and tell them nothing new.
func (a *admission) acquire(key types.NamespacedName) bool {
	if a.max <= 0 {
		return true
	}
	a.mu.Lock()
	if a.holders[key] {
		a.mu.Unlock()
		return true
	}
	_, queued := a.waiting[key]
	if free := a.max - len(a.holders); free > 0 {
		if !queued && len(a.waiting) < free || queued && slices.Contains(a.front(free), key) {
			delete(a.waiting, key)
			a.trim()
			a.holders[key] = true
			a.mu.Unlock()
			return true
		}
	}
	var wake []types.NamespacedName
	if !queued {
		a.issued++
		a.waiting[key] = a.issued
		a.line = append(a.line, ticket{key: key, n: a.issued})
		if len(a.waiting) == 1 {
			for h := range a.holders {
				wake = append(wake, h)
			}
		}
	}
	a.mu.Unlock()
	a.wake(wake)
	return false
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
	delete(a.waiting, key)
	if dead := len(a.line) - len(a.waiting); dead > len(a.waiting)+64 {
		a.line = slices.DeleteFunc(a.line, func(t ticket) bool { return !a.valid(t) })
	}
	// Whoever is now within reach of a free place is woken, whether key
	// held one or only left the line ahead of them.
	var wake []types.NamespacedName
	if free := a.max - len(a.holders); free > 0 && (held || len(a.waiting) > 0) {
		wake = a.front(free)
	}
	a.mu.Unlock()
	a.wake(wake)
}

// trim drops the tickets of those who left the line from its front. a.mu
// must be held.
func (a *admission) trim() {
	for len(a.line) > 0 && !a.valid(a.line[0]) {
		a.line = a.line[1:]
	}
}

// front returns the first n keys in line. a.mu must be held.
func (a *admission) front(n int) []types.NamespacedName {
	a.trim()
	keys := make([]types.NamespacedName, 0, n)
	for _, t := range a.line {
		if len(keys) == n {
			break
		}
		if a.valid(t) {
			keys = append(keys, t.key)
		}
	}
	return keys
}

// valid reports whether t still stands for a key in line.
func (a *admission) valid(t ticket) bool {
	n, ok := a.waiting[t.key]
	return ok && n == t.n
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
	return len(a.holders), len(a.waiting)
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
