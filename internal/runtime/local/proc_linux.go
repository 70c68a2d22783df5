package local

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// sysProcAttr starts an agent in its own process group, so that stopping
// it can reach everything it left behind, and has the kernel SIGKILL it
// when the operator dies, so that an operator crash never leaves agents
// running. (The signal follows the OS thread that started the process;
// the Go runtime keeps threads alive unless a goroutine exits while
// locked to one, which this package never does.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// alive reports whether pid is a running process (not a zombie).
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	state := b[i+2]
	return state != 'Z' && state != 'X'
}

// servesDir reports whether pid is an agent started for the state
// directory dir: its command line names dir's token file. It guards
// against killing an unrelated process that reused a recorded pid.
func servesDir(pid int, dir string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return false
	}
	want := []byte(filepath.Join(dir, tokenFile))
	for _, arg := range bytes.Split(b, []byte{0}) {
		if bytes.Equal(arg, want) {
			return true
		}
	}
	return false
}
