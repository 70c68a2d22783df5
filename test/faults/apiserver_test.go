package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testAPIServerRestart stops kube-apiserver (etcd keeps running) at a
// random point of the updates that follow a config change of several
// Stacks, keeps it down for a random while and starts it again,
// APIServerRestarts times. The operator must ride it out: every Stack
// converges with its last value written, no Update stays in progress, and
// no change is applied twice.
func (s *suite) testAPIServerRestart(t *testing.T) {
	rnd := seeded(t)
	ns, journal := s.newNamespace(t, "apiserver-")
	repo := s.newRepo(ns, program(s.outDir, ""))
	names, window := s.deployStacks(t, ns, repo, journal, s.params.Stacks)

	for i := 1; i <= s.params.APIServerRestarts; i++ {
		value := fmt.Sprintf("v%d", i)
		for _, name := range names {
			s.setConfig(t, ns, name, map[string]any{"message": value})
		}
		delay := time.Duration(rnd.Float64() * float64(window))
		down := 2*time.Second + time.Duration(rnd.Float64()*float64(8*time.Second))
		time.Sleep(delay)
		running := s.runningUpdates(t, ns)
		s.restartAPIServer(t, down)
		t.Logf("restart %d: kube-apiserver stopped %s after the change for %s, %d updates running %v",
			i, fmtDuration(delay), fmtDuration(down), len(running), running)
		if !s.op.Running() {
			fatalf(t, "restart %d: the operator exited while the API server was down:\n%s", i, s.op.LogTail(40))
		}
		s.waitConverged(t, ns, 5*time.Minute, names...)
		for _, name := range names {
			if got := readFile(t, filepath.Join(s.outDir, name+".txt")); got != value {
				errorf(t, "restart %d: %s: the file holds %q, want %q", i, name, got, value)
			}
		}
		if left := s.inProgress(t, ns); len(left) > 0 {
			errorf(t, "restart %d: Updates still in progress after every Stack converged: %v", i, left)
		}
	}
	report := s.checkWrites(t, ns, names, readJournal(t, journal))
	t.Logf("RESULT apiserver-restart: restarts=%d stacks=%d %s", s.params.APIServerRestarts, len(names), report)
}

// restartAPIServer kills kube-apiserver, waits for down and starts it
// again on the same address with the same serving certificate, client CA
// and service-account key, so that every client (the operator's
// kubeconfig, the test's own) reconnects to it. envtest would otherwise
// make new certificates in a new directory: the directory is copied
// aside before Stop removes it, and the restart is pointed at the copy.
func (s *suite) restartAPIServer(t *testing.T, down time.Duration) {
	t.Helper()
	api := s.env.Environment.ControlPlane.APIServer
	keep, err := os.MkdirTemp(s.tmp, "apiserver-")
	if err != nil {
		fatal(t, err)
	}
	if err := os.CopyFS(keep, os.DirFS(api.CertDir)); err != nil {
		fatalf(t, "keeping the API server's certificates: %v", err)
	}
	// A graceful stop waits for the operator's watches and can outlast
	// envtest's timeout: the API server is killed, as a crash would end
	// it, and envtest then only records that it is gone.
	pid := childProcess(t, "kube-apiserver")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		fatalf(t, "killing kube-apiserver: %v", err)
	}
	if err := api.Stop(); err != nil {
		fatalf(t, "stopping kube-apiserver: %v", err)
	}
	time.Sleep(down)
	api.CertDir = keep
	if err := api.Start(); err != nil {
		fatalf(t, "starting kube-apiserver again: %v", err)
	}
}

// childProcess returns the pid of this process's one child running the
// executable named exe.
func childProcess(t *testing.T, exe string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		fatal(t, err)
	}
	var found []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		path, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || filepath.Base(path) != exe {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the command name: state, then the parent's pid.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(os.Getpid()) {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		fatalf(t, "want one %s child of this process, found %v", exe, found)
	}
	return found[0]
}
