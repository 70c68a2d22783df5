package server

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// childSysProcAttr starts the CLI in its own process group and has the
// kernel SIGKILL it when the agent dies, so that a killed agent never
// leaves a CLI running (and holding the stack lock) behind it. (The signal
// is tied to the OS thread that started the CLI; the Go runtime does not
// retire threads of goroutines that never lock one, which this package's
// callers do not.)
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times; it is 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// procStat returns the fields of /proc/<pid>/stat after the command name
// (field 3, the state, is index 0), or nil when the process does not exist.
func procStat(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil
	}
	// The command name is in parentheses and may itself contain spaces or
	// parentheses; the fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// processAlive reports whether pid is a live process (a zombie is not).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && err != syscall.EPERM {
		return false
	}
	st := procStat(pid)
	if st == nil {
		// No /proc entry although kill succeeded: be conservative.
		return true
	}
	return st[0] != "Z" && st[0] != "X"
}

// processStartTime returns when pid started, to within a second (the
// resolution of the boot time the kernel reports).
func processStartTime(pid int) (time.Time, bool) {
	st := procStat(pid)
	// starttime is field 22 of stat, index 19 after the command name.
	if len(st) < 20 {
		return time.Time{}, false
	}
	ticks, err := strconv.ParseInt(st[19], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	boot, ok := bootTime()
	if !ok {
		return time.Time{}, false
	}
	return boot.Add(time.Duration(ticks) * time.Second / clockTicks), true
}

// bootTime reads the btime line of /proc/stat.
func bootTime() (time.Time, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			return time.Unix(sec, 0), true
		}
	}
	return time.Time{}, false
}

// descendants returns every process below pid, children first.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st := procStat(p)
		if len(st) < 2 {
			continue
		}
		ppid, err := strconv.Atoi(st[1])
		if err != nil {
			continue
		}
		children[ppid] = append(children[ppid], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
