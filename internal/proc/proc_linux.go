package proc

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// SessionAttr starts a command in a session (and so a process group) of
// its own, which the plugins it starts in groups of their own stay in, and
// has the kernel SIGKILL it when its parent dies. (The signal follows the
// OS thread that started the command; the Go runtime retires a thread only
// when a goroutine exits while locked to it, which stackyard never does.)
func SessionAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
}

// GroupAttr starts a command in a process group of its own, so that a
// signal to the group reaches whatever it started there too, and has the
// kernel SIGKILL it when its parent dies (see SessionAttr).
func GroupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times; it is 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// stat is what stackyard reads of /proc/<pid>/stat.
type stat struct {
	state byte
	sid   int
	start uint64 // clock ticks after boot
}

// readStat reads /proc/<pid>/stat; false when the process does not exist.
func readStat(pid int) (stat, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return stat{}, false
	}
	// The command name is in parentheses and may itself hold spaces or
	// parentheses: the fields that follow start after the last ')'. There
	// the state is field 3 of stat(5), the session 6 and the start 22.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return stat{}, false
	}
	sid, err1 := strconv.Atoi(f[3])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return stat{}, false
	}
	return stat{state: f[0][0], sid: sid, start: start}, true
}

// running reports whether a process in this state still runs: a zombie
// (Z) has exited and waits only to be reaped, a dead one (X) is going.
func (s stat) running() bool { return s.state != 'Z' && s.state != 'X' }

// Alive reports whether pid is a process that has not exited; a zombie
// waiting for its parent to reap it is not alive. A process that exists
// but whose /proc entry cannot be read counts as alive.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && err != syscall.EPERM {
		return false
	}
	st, ok := readStat(pid)
	return !ok || st.running()
}

// StartTime returns when pid started, to within a second (the resolution
// of the boot time the kernel reports).
func StartTime(pid int) (time.Time, bool) {
	st, ok := readStat(pid)
	if !ok {
		return time.Time{}, false
	}
	boot, ok := bootTime()
	if !ok {
		return time.Time{}, false
	}
	return boot.Add(time.Duration(st.start) * time.Second / clockTicks), true //nolint:gosec // clock ticks since boot fit
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

// Cmdline returns pid's command line, or nil when it cannot be read.
func Cmdline(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// Cwd returns pid's working directory, or "" when it cannot be read.
func Cwd(pid int) string {
	dir, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd"))
	if err != nil {
		return ""
	}
	return dir
}

// hasEnv reports whether pid's environment, as it was when the process
// started, holds the entry kv. Another user's process cannot be read and
// has none (it could not be signalled anyway).
func hasEnv(pid int, kv string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return false
	}
	for _, e := range bytes.Split(b, []byte{0}) {
		if string(e) == kv {
			return true
		}
	}
	return false
}

// Members returns the running processes of the tree (zombies left out):
// those with the tree's mark in their environment, and those in the
// leader's session that started after the leader did, unless the leader's
// pid now belongs to another process. This process is never a member.
func (t Tree) Members() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	mark := t.Env()
	session := t.Leader > 0
	if session {
		// A live leader that started at another time is a new process
		// with the recorded pid: its session is not the tree's.
		if st, ok := readStat(t.Leader); ok && st.running() && st.start != t.LeaderStart {
			session = false
		}
	}
	self := os.Getpid()
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		st, ok := readStat(pid)
		if !ok || !st.running() {
			continue
		}
		if (session && st.sid == t.Leader && st.start >= t.LeaderStart) || hasEnv(pid, mark) {
			out = append(out, pid)
		}
	}
	return out
}
