//go:build !linux

package proc

import (
	"syscall"
	"time"
)

// SessionAttr starts a command in a session (and so a process group) of
// its own. Outside Linux there is no parent-death signal: a command whose
// parent is killed runs on.
func SessionAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true}
}

// GroupAttr starts a command in a process group of its own; see
// SessionAttr.
func GroupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// Alive reports whether pid is a process; a zombie counts, as it cannot be
// told apart without /proc.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// StartTime is unknown outside Linux.
func StartTime(int) (time.Time, bool) { return time.Time{}, false }

// Cmdline is unknown outside Linux.
func Cmdline(int) []string { return nil }

// Cwd is unknown outside Linux.
func Cwd(int) string { return "" }

// readStat knows nothing outside Linux.
func readStat(int) (stat, bool) { return stat{}, false }

// stat is empty outside Linux.
type stat struct{ start uint64 }

// Members finds nothing outside Linux, where there is no /proc to scan.
func (t Tree) Members() []int { return nil }
