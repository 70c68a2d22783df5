package promotion

import "sync"

// DefaultWorkers is how many Promotions are reconciled at once when the
// Reconciler does not say.
const DefaultWorkers = 4

// stageLocks serializes the reconciles of the promotions of one stage,
// while those of different stages run at once. The queue decision (does
// this promotion start, or wait, or give way) reads the stage's
// promotions live and holds only while no other promotion of the stage
// is being decided: each reconcile holds its stage's lock until its
// status is written.
type stageLocks struct {
	mu    sync.Mutex
	locks map[string]*stageLock
}

type stageLock struct {
	sync.Mutex
	holders int // those holding or waiting for it
}

// lock takes the lock of the stage key ("namespace/stage") and returns
// its release.
func (l *stageLocks) lock(key string) func() {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*stageLock{}
	}
	sl := l.locks[key]
	if sl == nil {
		sl = &stageLock{}
		l.locks[key] = sl
	}
	sl.holders++
	l.mu.Unlock()

	sl.Lock()
	return func() {
		sl.Unlock()
		l.mu.Lock()
		if sl.holders--; sl.holders == 0 {
			delete(l.locks, key)
		}
		l.mu.Unlock()
	}
}
