package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// diskSize is the size of the tmpfs under the scenario's workspaces.
const diskSize = "32m"

// testDiskFull puts the workspaces of a namespace on a small tmpfs (the
// test runs as root to mount it), deploys a Stack there, fills the disk
// and changes the Stack (its config, or every other time its program's
// commit), DiskFills times: the Stack must report that the disk is full,
// and converge once space is freed, with nothing else done.
func (s *suite) testDiskFull(t *testing.T) {
	seeded(t) // nothing random; the seed line keeps the logs alike
	ns, journal := s.newNamespace(t, "disk-")
	name := ns + "-0"
	mountTmpfs(t, filepath.Join(s.op.StateDir, "workspaces", ns), diskSize)
	repo := s.git.CreateRepo(name)
	repo.Commit("main", map[string]string{"Pulumi.yaml": s.revisionProgram("revision 0")})
	if err := s.client.Create(context.Background(), s.stackOf(ns, name, repo.URL, "v0", journal)); err != nil {
		fatal(t, err)
	}
	s.waitConverged(t, ns, 3*time.Minute, name)
	wsDir := s.workspaceDir(ns, name)
	t.Logf("a deployed workspace takes %s of the %s disk", du(t, wsDir), diskSize)

	for i := 1; i <= s.params.DiskFills; i++ {
		filler := filepath.Join(wsDir, "filler")
		fill(t, filler)
		// The change is new config, which the agent writes into the
		// project, or every other time a new commit, which it fetches.
		value, revision := fmt.Sprintf("v%d", i), fmt.Sprintf("revision %d", i)
		change := "config"
		if i%2 == 0 {
			change = "commit"
			value = fmt.Sprintf("v%d", i-1)
			repo.Commit("main", map[string]string{"Pulumi.yaml": s.revisionProgram(revision)})
			s.requestReconcile(t, ns, name, revision)
		} else {
			s.setConfig(t, ns, name, map[string]any{"message": value})
		}
		var said string
		waitFor(t, time.Minute, "the Stack to report the full disk", func() string {
			st := s.getStack(t, ns, name)
			said = mentions(st, "no space left on device")
			if said == "" {
				return "nothing says the disk is full: " + describe(st) + "; " + s.describeWorkspace(ns, name)
			}
			return ""
		})
		t.Logf("fill %d (new %s): the Stack says %s", i, change, said)
		if err := os.Remove(filler); err != nil {
			fatal(t, err)
		}
		freed := time.Now()
		s.waitConverged(t, ns, 3*time.Minute, name)
		t.Logf("fill %d: converged %s after the space was freed", i, fmtDuration(time.Since(freed)))
		if got := readFile(t, filepath.Join(s.outDir, name+".txt")); got != value {
			errorf(t, "fill %d: the file holds %q, want %q", i, got, value)
		}
		if change == "commit" {
			if got := readFile(t, filepath.Join(s.outDir, name+"-static.txt")); got != revision {
				errorf(t, "fill %d: the file of the commit holds %q, want %q", i, got, revision)
			}
		}
	}
	t.Logf("RESULT disk-full: fills=%d, each reported and recovered from without help", s.params.DiskFills)
}

// mentions returns the first condition or last-update message of st that
// contains text, prefixed with where it is, or "".
func mentions(st *pulumiv1.Stack, text string) string {
	for _, c := range st.Status.Conditions {
		if strings.Contains(c.Message, text) {
			return fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	if lu := st.Status.LastUpdate; lu != nil && strings.Contains(lu.Message, text) {
		return fmt.Sprintf("lastUpdate %s %s: %s", lu.Name, lu.State, lu.Message)
	}
	return ""
}

// mountTmpfs mounts a tmpfs of size at dir, creating dir, and unmounts it
// when the test ends, whatever happens. It needs root; without it the test
// fails, saying so.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fatal(t, err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0755"); err != nil {
		fatalf(t, "mounting a tmpfs at %s (this scenario runs as root): %v", dir, err)
	}
	t.Cleanup(func() {
		// Processes may still hold the directory (an idle agent's working
		// directory); a lazy unmount detaches it all the same.
		if err := syscall.Unmount(dir, 0); err != nil {
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
				errorf(t, "unmounting %s: %v", dir, err)
			}
		}
	})
}

// fill writes to path until the disk is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		fatal(t, err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			fatal(t, err)
		}
	}
}

// du returns the space the files under dir take, for a log line.
func du(t *testing.T, dir string) string {
	t.Helper()
	var total int64
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			total += info.Size()
		}
		return nil
	})
	return fmt.Sprintf("%.1f MiB", float64(total)/(1<<20))
}
