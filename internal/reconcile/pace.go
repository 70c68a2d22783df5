package reconcile

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// DefaultPace is how many of one controller's waiting objects a Pacer lets
// come back per second, together, when nothing wakes them sooner.
const DefaultPace = 20

// paceSweep is how often a Pacer forgets the objects that stopped waiting
// without saying so (deleted before their next reconcile).
const paceSweep = 10 * time.Second

// Pacer spreads the looks of a controller's waiting objects over time. A
// Waiting error's interval is a safety net for one object: what it waits
// for (an agent's place, a Workspace getting ready, an Update ending)
// wakes it through a watch or a notification first. The same interval for
// 10,000 objects of a burst is 10,000 reconciles per interval that find
// nothing new, work that grows with the burst for every change in it.
// A Pacer stretches the interval of each wait so that the objects waiting
// at once come back at most Rate per second together, and never sooner
// than their own interval.
//
// A nil Pacer does not pace. A Pacer is safe for concurrent use.
type Pacer struct {
	// Rate is how many waiting objects may come back per second; zero
	// means DefaultPace.
	Rate float64
	// Now is the clock; nil means time.Now. Tests set it.
	Now func() time.Time

	mu      sync.Mutex
	waiting map[types.NamespacedName]time.Time // until when each counts as waiting
	swept   time.Time
}

// Wait records that key waits, and returns when to look at it again:
// interval, or longer when more objects wait than Rate lets come back
// within it.
func (p *Pacer) Wait(key types.NamespacedName, interval time.Duration) time.Duration {
	if p == nil {
		return interval
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if p.waiting == nil {
		p.waiting = map[types.NamespacedName]time.Time{}
	}
	if now.Sub(p.swept) >= paceSweep {
		for k, until := range p.waiting {
			if now.After(until) {
				delete(p.waiting, k)
			}
		}
		p.swept = now
	}
	n := len(p.waiting)
	if _, ok := p.waiting[key]; !ok {
		n++
	}
	after := max(interval, time.Duration(float64(n)/p.rate()*float64(time.Second)))
	// It counts until a little after its next look is due, so that a
	// busy queue's lateness does not drop it; an object deleted while it
	// waits stops counting then.
	p.waiting[key] = now.Add(after + after/2)
	return after
}

// Done records that key no longer waits.
func (p *Pacer) Done(key types.NamespacedName) {
	if p == nil {
		return
	}
	p.mu.Lock()
	delete(p.waiting, key)
	p.mu.Unlock()
}

// Waiting returns how many objects count as waiting.
func (p *Pacer) Waiting() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waiting)
}

func (p *Pacer) rate() float64 {
	if p.Rate <= 0 {
		return DefaultPace
	}
	return p.Rate
}

func (p *Pacer) now() time.Time {
	if p.Now == nil {
		return time.Now()
	}
	return p.Now()
}
