//go:build !linux

package local

import "syscall"

// sysProcAttr starts an agent in its own process group. There is no
// parent-death signal outside Linux: agents are stopped when the manager
// stops, but one left behind by a crashed operator runs until stopped by
// hand.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// alive reports whether pid is a running process.
func alive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}

// servesDir cannot tell what a process serves without /proc, so a pid
// recorded by a previous operator is never killed.
func servesDir(int, string) bool { return false }
