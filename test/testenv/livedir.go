package testenv

import (
	"os"
	"testing"
	"time"
)

// liveDirGrace is how long LiveDir's cleanup keeps trying to remove the
// directory while a writer that outlived the test is still finishing.
const liveDirGrace = 30 * time.Second

// LiveDir returns a new temporary directory for state that an operator
// running beside the test writes: a Stack's file backend, a program's
// output. Unlike t.TempDir, its removal tolerates a writer that outlives
// the test (a drift check or retry still running when the test's Stack is
// deleted with its namespace): the cleanup retries until the directory is
// gone, and fails the test only when it is still there after a grace.
func LiveDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "stackyard-live-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := removeEventually(dir, liveDirGrace); err != nil {
			t.Errorf("removing %s: %v", dir, err)
		}
	})
	return dir
}

// removeEventually removes dir, trying again while something else keeps
// adding to it, until grace has passed.
func removeEventually(dir string, grace time.Duration) error {
	deadline := time.Now().Add(grace)
	for {
		err := os.RemoveAll(dir)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
