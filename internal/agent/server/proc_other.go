//go:build !linux

package server

import (
	"syscall"
	"time"
)

// childSysProcAttr starts the CLI in its own process group. Outside Linux
// there is no parent-death signal, so a killed agent may leave the CLI
// running; the agent is only deployed on Linux.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// processAlive reports whether pid is a live process.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// processStartTime is unknown outside Linux.
func processStartTime(int) (time.Time, bool) { return time.Time{}, false }

// descendants is unknown outside Linux; only the process group is killed.
func descendants(int) []int { return nil }
