package promotion

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestStageLocks: the reconciles of one stage never overlap; those of
// different stages may; a lock nobody holds is forgotten.
func TestStageLocks(t *testing.T) {
	var l stageLocks
	var inStage [2]atomic.Int32
	var overlapped, parallel atomic.Bool
	var wg sync.WaitGroup
	start := make(chan struct{})
	both := make(chan struct{}, 2)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			stage := i % 2
			unlock := l.lock([]string{"ns/dev", "ns/prod"}[stage])
			defer unlock()
			if inStage[stage].Add(1) > 1 {
				overlapped.Store(true)
			}
			if inStage[1-stage].Load() > 0 {
				parallel.Store(true)
			}
			if i < 2 {
				// The first of each stage waits for the other: two
				// stages are held at once.
				both <- struct{}{}
				for len(both) < 2 && !parallel.Load() {
					if inStage[1-stage].Load() > 0 {
						parallel.Store(true)
					}
				}
			}
			inStage[stage].Add(-1)
		}()
	}
	close(start)
	wg.Wait()
	if overlapped.Load() {
		t.Error("two reconciles of one stage overlapped")
	}
	if !parallel.Load() {
		t.Error("the reconciles of two stages never ran at once")
	}
	if len(l.locks) != 0 {
		t.Errorf("%d locks left after everyone let go", len(l.locks))
	}
}
