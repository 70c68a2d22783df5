package testenv

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestRemoveEventuallyOutlastsAWriter removes a directory while a writer
// keeps creating files in it for a while: the removal succeeds once the
// writer stops, within the grace.
func TestRemoveEventuallyOutlastsAWriter(t *testing.T) {
	dir, err := os.MkdirTemp("", "livedir-test-")
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; !stop.Load(); i++ {
			sub := filepath.Join(dir, "state", "nested")
			_ = os.MkdirAll(sub, 0o755)
			_ = os.WriteFile(filepath.Join(sub, "f"+string(rune('a'+i%26))), []byte("x"), 0o644)
		}
	}()
	time.AfterFunc(500*time.Millisecond, func() { stop.Store(true) })
	if err := removeEventually(dir, 10*time.Second); err != nil {
		t.Fatalf("removeEventually: %v", err)
	}
	<-done
	// The writer may have recreated the directory after the last removal
	// it raced with; once it has stopped, one more removal must finish it.
	if err := removeEventually(dir, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s is still there: %v", dir, err)
	}
}
