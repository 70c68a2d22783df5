//go:build bench

package bench

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicks is USER_HZ, the unit of the times in /proc/<pid>/stat: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// procStat is what /proc/<pid>/stat says about one process.
type procStat struct {
	ppid  int
	state byte
	// cpu is utime+stime; childCPU is cutime+cstime (children waited for).
	cpu, childCPU int64
}

// readStat parses /proc/<pid>/stat; ok is false when the process is gone.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, false
	}
	// The command name (field 2) may hold spaces; fields after it do not.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return procStat{}, false
	}
	// f[0] is field 3 (state): field k is f[k-3].
	return procStat{
		state:    f[0][0],
		ppid:     int(parseInt(f[1])),
		cpu:      parseInt(f[11]) + parseInt(f[12]),
		childCPU: parseInt(f[13]) + parseInt(f[14]),
	}, true
}

// parseInt parses a decimal, 0 when it is not one.
func parseInt(s string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return n
}

// tree returns root and all its live descendants (zombies left out).
func tree(root int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok && st.state != 'Z' {
			children[st.ppid] = append(children[st.ppid], pid)
		}
	}
	out := []int{root}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// memory is the resident memory of a set of processes, in bytes.
type memory struct {
	RSS, PSS int64
}

// readMemory sums Rss and Pss of smaps_rollup over pids.
func readMemory(pids []int) memory {
	var m memory
	for _, pid := range pids {
		f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "smaps_rollup"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			kb := parseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB")) << 10
			switch k {
			case "Rss":
				m.RSS += kb
			case "Pss":
				m.PSS += kb
			}
		}
		_ = f.Close()
	}
	return m
}

// treeCPU is the CPU time, in ticks, of pids (utime+stime) and of the
// children they have waited for.
func treeCPU(pids []int) int64 {
	var ticks int64
	for _, pid := range pids {
		if st, ok := readStat(pid); ok {
			ticks += st.cpu + st.childCPU
		}
	}
	return ticks
}

// ownCPU is the CPU time, in ticks, of process pid alone, without its
// children; 0 when it is gone.
func ownCPU(pid int) int64 {
	st, _ := readStat(pid)
	return st.cpu
}

// controlPlaneCPU is the CPU time, in ticks, of this process's
// kube-apiserver and etcd (envtest's control plane).
func controlPlaneCPU() int64 {
	var ticks int64
	for _, pid := range tree(os.Getpid()) {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		if err != nil {
			continue
		}
		if name := strings.TrimSpace(string(b)); name == "kube-apiserver" || name == "etcd" {
			if st, ok := readStat(pid); ok {
				ticks += st.cpu
			}
		}
	}
	return ticks
}

// tickSeconds converts CPU ticks to seconds of one core.
func tickSeconds(ticks int64) Seconds {
	return Seconds(float64(ticks) / clockTicks)
}

// childCPU is the CPU time, in ticks, of the children this process has
// waited for (the floor's bare CLI runs, with what they waited for).
func childCPU() int64 {
	st, _ := readStat(os.Getpid())
	return st.childCPU
}

// machineBusyTicks is the machine's total non-idle CPU time from /proc/stat.
func machineBusyTicks() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var busy int64
	// user nice system idle iowait irq softirq steal ...
	for i, v := range f[1:] {
		if i == 3 || i == 4 || i >= 8 {
			continue // idle, iowait, guest (already counted in user)
		}
		busy += parseInt(v)
	}
	return busy
}

// isAgent reports whether pid is a stackyard agent: `stackyard-agent
// serve`, or `stackyard agent serve`. A pre-started agent not yet bound
// to a Workspace (`serve --await-spec`, still working in /) is not one:
// it holds no place and runs nothing.
func isAgent(pid int) bool {
	args, ok := commandLine(pid)
	if !ok {
		return false
	}
	if slices.Contains(args, "--await-spec") {
		if cwd, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd")); err != nil || cwd == "/" {
			return false
		}
	}
	switch {
	case len(args) > 1 && filepath.Base(args[0]) == "stackyard-agent":
		return args[1] == "serve"
	case len(args) > 2 && filepath.Base(args[0]) == "stackyard":
		return args[1] == "agent" && args[2] == "serve"
	}
	return false
}

// commandLine returns the arguments pid was started with; ok is false
// when it is gone, or when it is a fork that has not yet exec'd. Go starts
// a command with vfork, and until the child's execve its cmdline reads as
// its parent's: an agent about to run `pulumi up` has a child that reads
// as an agent, and a `pulumi up` starting its language host one that
// reads as a second `pulumi up`. Such a child has its parent's command
// line, which no process of the operator's tree has once it runs.
func commandLine(pid int) ([]string, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || len(b) == 0 {
		return nil, false
	}
	if st, ok := readStat(pid); ok && st.ppid > 0 {
		if parent, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(st.ppid), "cmdline")); err == nil && string(parent) == string(b) {
			return nil, false
		}
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), true
}

// agents counts the agents among root's descendants.
func agents(root int) int {
	n := 0
	for _, pid := range tree(root)[1:] {
		if isAgent(pid) {
			n++
		}
	}
	return n
}

// sampler reads the memory of a process tree every interval and keeps the
// peak PSS, the way the burst figure reports the operator's memory.
//
// PSS comes from smaps_rollup, which walks every page table of every
// process in the tree: read at each tick, it cost about 1 % of the
// machine during a burst of 100, CPU the operator's tree competes for
// and the floor does not. So each tick reads the cheap resident size
// (statm), and PSS only when the tree's RSS is at least pssShare of the
// highest RSS seen so far: most ticks cost a statm read. The peak found is
// the highest PSS among those samples: a peak of PSS at a tick whose RSS
// is lower than that (fewer processes sharing more private memory) would
// be missed, which the figure's text says.
type sampler struct {
	root     int
	stop     chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	peak     memory
	peakAt   time.Time
	peakRSS  int64
	maxAgent int
}

// pssShare is the share of its highest RSS a tree must hold for the sampler
// to read its PSS.
const pssShare = 0.9

// startSampler samples root's tree every interval until Stop.
func startSampler(root int, interval time.Duration) *sampler {
	s := &sampler{root: root, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			s.sample(tree(root))
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// sample records one reading of the tree pids.
func (s *sampler) sample(pids []int) {
	n := 0
	for _, pid := range pids[1:] {
		if isAgent(pid) {
			n++
		}
	}
	rss := residentBytes(pids)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxAgent = max(s.maxAgent, n)
	s.peakRSS = max(s.peakRSS, rss)
	if float64(rss) < pssShare*float64(s.peakRSS) {
		return
	}
	if m := readMemory(pids); m.PSS > s.peak.PSS {
		s.peak, s.peakAt = m, time.Now()
	}
}

// residentBytes sums the resident size statm reports over pids: a counter
// the kernel keeps, so reading it walks no page table.
func residentBytes(pids []int) int64 {
	var pages int64
	for _, pid := range pids {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "statm"))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages += parseInt(f[1])
		}
	}
	return pages * int64(os.Getpagesize())
}

// Stop ends sampling and returns the peak tree memory and the most agents
// seen at once.
func (s *sampler) Stop() (memory, int) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak, s.maxAgent
}

// cliWatcher records the Pulumi CLI commands run in a process tree, by
// polling /proc every 50 ms (commands shorter than that can be missed): it
// shows what an operation's time goes to.
type cliWatcher struct {
	stop chan struct{}
	done chan struct{}
	seen map[int]string
	// agents are the agent pids seen.
	agents map[int]bool
}

// watchCLI starts recording the pulumi commands under root.
func watchCLI(root int) *cliWatcher {
	w := &cliWatcher{stop: make(chan struct{}), done: make(chan struct{}), seen: map[int]string{}, agents: map[int]bool{}}
	go func() {
		defer close(w.done)
		for {
			for _, pid := range tree(root)[1:] {
				if _, ok := w.seen[pid]; ok {
					continue
				}
				if isAgent(pid) {
					w.agents[pid] = true
					continue
				}
				// A fork not yet exec'd is looked at again next time.
				args, ok := commandLine(pid)
				if !ok || filepath.Base(args[0]) != "pulumi" {
					continue
				}
				var words []string
				for _, a := range args[1:] {
					if strings.HasPrefix(a, "-") || len(words) == 2 {
						break
					}
					words = append(words, a)
				}
				w.seen[pid] = strings.Join(words, " ")
			}
			select {
			case <-w.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return w
}

// Stop ends recording and returns the commands seen, in pid order, and the
// agent pids.
func (w *cliWatcher) Stop() ([]string, map[int]bool) {
	close(w.stop)
	<-w.done
	pids := make([]int, 0, len(w.seen))
	for pid := range w.seen {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	out := make([]string, 0, len(pids))
	for _, pid := range pids {
		out = append(out, w.seen[pid])
	}
	return out, w.agents
}
