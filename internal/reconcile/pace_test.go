package reconcile

import (
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestPacer(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	p := &Pacer{Rate: 10, Now: func() time.Time { return now }}
	key := func(i int) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: strconv.Itoa(i)} }

	// Few waiting: each keeps its own interval.
	for i := range 50 {
		if got := p.Wait(key(i), 30*time.Second); got != 30*time.Second {
			t.Fatalf("waiter %d of 50 at 10/s: %v, want its own 30s", i+1, got)
		}
	}
	// The 301st at 10/s: 300 come back within 30 s; it waits 30.1 s.
	for i := 50; i < 300; i++ {
		p.Wait(key(i), 30*time.Second)
	}
	if got := p.Wait(key(300), 30*time.Second); got != 30100*time.Millisecond {
		t.Fatalf("the 301st waiter at 10/s: %v, want 30.1s", got)
	}
	// Looking again at one who waits does not count it twice.
	if got := p.Wait(key(0), 30*time.Second); got != 30100*time.Millisecond {
		t.Fatalf("a waiter looked at again: %v, want 30.1s", got)
	}
	// 10,000 waiting: 1,000 s apart each, not 333 reconciles a second.
	for i := 301; i < 10000; i++ {
		p.Wait(key(i), 30*time.Second)
	}
	if got := p.Wait(key(0), 30*time.Second); got != 1000*time.Second {
		t.Fatalf("one of 10,000 waiters at 10/s: %v, want 1000s", got)
	}
	// Those done stop counting.
	for i := 100; i < 10000; i++ {
		p.Done(key(i))
	}
	if got := p.Waiting(); got != 100 {
		t.Fatalf("%d waiting after 9,900 were done, want 100", got)
	}
	// So do those that never come back (deleted while waiting), once
	// their next look is well past.
	now = now.Add(2000 * time.Second)
	if got := p.Wait(key(0), time.Second); got != time.Second {
		t.Fatalf("alone again after the others expired: %v, want 1s", got)
	}
	if got := p.Waiting(); got != 1 {
		t.Fatalf("%d waiting after the others expired, want 1", got)
	}

	// A nil Pacer does not pace.
	var none *Pacer
	if got := none.Wait(key(0), time.Second); got != time.Second {
		t.Fatalf("a nil Pacer: %v", got)
	}
	none.Done(key(0))
}

// TestComputeResultPaces checks that ComputeResult counts a Waiting
// object with the Schedule's Pacer and forgets it on any other outcome.
func TestComputeResultPaces(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	p := &Pacer{Rate: 1, Now: func() time.Time { return now }}
	obj := func(name string) Schedule {
		return Schedule{Pacer: p, Object: types.NamespacedName{Namespace: "ns", Name: name}}
	}
	wait := NewWaiting("Pending", errCause, 2*time.Second)
	for i, name := range []string{"a", "b", "c"} {
		got, err := ComputeResult(ResultEmpty, wait, obj(name))
		want := max(2*time.Second, time.Duration(i+1)*time.Second)
		if err != nil || got.RequeueAfter != want {
			t.Fatalf("waiter %s: %+v, %v; want %v", name, got, err, want)
		}
	}
	for _, out := range []struct {
		res Result
		err error
	}{{ResultSuccess, nil}, {ResultEmpty, NewStalling("SpecInvalid", errCause)}, {ResultEmpty, errCause}} {
		_, _ = ComputeResult(out.res, out.err, obj("a"))
		if got := p.Waiting(); got != 2 {
			t.Fatalf("outcome %v, %v: %d waiting, want 2", out.res, out.err, got)
		}
		_, _ = ComputeResult(ResultEmpty, wait, obj("a"))
	}
}
