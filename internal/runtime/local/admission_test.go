package local

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestAdmission(t *testing.T) {
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }
	var mu sync.Mutex
	var woken []string
	a := newAdmission(2, func(k types.NamespacedName) {
		mu.Lock()
		woken = append(woken, k.Name)
		mu.Unlock()
	})
	wokenNow := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			got := slices.Clone(woken)
			mu.Unlock()
			slices.Sort(got)
			if slices.Equal(got, want) || time.Now().After(deadline) {
				if !slices.Equal(got, want) {
					t.Fatalf("woken %v, want %v", got, want)
				}
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		mu.Lock()
		woken = nil
		mu.Unlock()
	}
	type step struct {
		op     string // acquire, release
		name   string
		ok     bool
		wakes  []string
		counts [2]int
	}
	for i, s := range []step{
		{op: "acquire", name: "a", ok: true, counts: [2]int{1, 0}},
		{op: "acquire", name: "a", ok: true, counts: [2]int{1, 0}}, // holding already
		{op: "acquire", name: "b", ok: true, counts: [2]int{2, 0}},
		// c queues first: the line starts, and the holders are woken to
		// give their places up if idle. d behind it wakes nobody.
		{op: "acquire", name: "c", wakes: []string{"a", "b"}, counts: [2]int{2, 1}},
		{op: "acquire", name: "d", counts: [2]int{2, 2}},
		{op: "acquire", name: "c", counts: [2]int{2, 2}}, // its place in line is kept
		// a frees a place: c, first in line, is woken; d may not overtake.
		{op: "release", name: "a", wakes: []string{"c"}, counts: [2]int{1, 2}},
		{op: "acquire", name: "d", counts: [2]int{1, 2}},
		{op: "acquire", name: "c", ok: true, counts: [2]int{2, 1}},
		{op: "release", name: "b", wakes: []string{"d"}, counts: [2]int{1, 1}},
		{op: "acquire", name: "d", ok: true, counts: [2]int{2, 0}},
		// Leaving the line (idled before its turn) with no place free
		// wakes nobody.
		{op: "acquire", name: "e", wakes: []string{"c", "d"}, counts: [2]int{2, 1}},
		{op: "release", name: "e", counts: [2]int{2, 0}},
		{op: "release", name: "unknown", counts: [2]int{2, 0}},
		// With a place free, whoever is first after one that leaves the
		// line is woken.
		{op: "acquire", name: "f", wakes: []string{"c", "d"}, counts: [2]int{2, 1}},
		{op: "acquire", name: "g", counts: [2]int{2, 2}},
		{op: "release", name: "c", wakes: []string{"f"}, counts: [2]int{1, 2}},
		{op: "release", name: "f", wakes: []string{"g"}, counts: [2]int{1, 1}},
		// One who leaves the line and comes back queues at its end.
		{op: "acquire", name: "h", counts: [2]int{1, 2}},
		{op: "release", name: "g", wakes: []string{"h"}, counts: [2]int{1, 1}},
		{op: "acquire", name: "g", counts: [2]int{1, 2}},
		{op: "acquire", name: "g", counts: [2]int{1, 2}},
		{op: "acquire", name: "h", ok: true, counts: [2]int{2, 1}},
		{op: "release", name: "h", wakes: []string{"g"}, counts: [2]int{1, 1}},
		{op: "acquire", name: "g", ok: true, counts: [2]int{2, 0}},
	} {
		switch s.op {
		case "acquire":
			if ok := a.acquire(key(s.name)); ok != s.ok {
				t.Fatalf("step %d: acquire(%s) = %v, want %v", i, s.name, ok, s.ok)
			}
		case "release":
			a.release(key(s.name))
		}
		wokenNow(s.wakes...)
		if running, queued := a.counts(); [2]int{running, queued} != s.counts {
			t.Fatalf("step %d: counts %d running, %d queued; want %v", i, running, queued, s.counts)
		}
	}

	// Zero means unbounded.
	free := newAdmission(0, nil)
	for _, n := range []string{"a", "b", "c"} {
		if !free.acquire(key(n)) {
			t.Fatalf("an unbounded admission refused %s", n)
		}
	}
}

// TestAdmissionLeavers checks that those who leave the line do not stay in
// it: a burst's Workspaces deleted or idled while queued would otherwise
// make every later look at the line walk past them.
func TestAdmissionLeavers(t *testing.T) {
	a := newAdmission(1, nil)
	key := func(i int) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: strconv.Itoa(i)} }
	if !a.acquire(key(0)) {
		t.Fatal("the first key found no place")
	}
	const n = 1000
	for i := 1; i <= n; i++ {
		if a.acquire(key(i)) {
			t.Fatalf("key %d took the only place", i)
		}
	}
	// All but the last leave, from the back and then the middle.
	for i := n - 1; i >= 1; i-- {
		a.release(key(i))
	}
	if running, queued := a.counts(); running != 1 || queued != 1 {
		t.Fatalf("counts %d running, %d queued; want 1, 1", running, queued)
	}
	if len(a.line) > 1+64 {
		t.Fatalf("the line keeps %d tickets for 1 key waiting", len(a.line))
	}
	if a.acquire(key(n)) {
		t.Fatal("the last key took a place still held")
	}
	a.release(key(0))
	if !a.acquire(key(n)) {
		t.Fatal("the last key, alone in line, found no place once it was free")
	}
	if len(a.line) != 0 {
		t.Fatalf("an empty line keeps %d tickets", len(a.line))
	}
}

func TestDefaultMaxAgents(t *testing.T) {
	if n := DefaultMaxAgents(); n < 1 {
		t.Fatalf("DefaultMaxAgents() = %d", n)
	}
	if memoryBytes() <= 0 {
		t.Fatal("MemTotal not found in /proc/meminfo")
	}
}

func TestReadCgroupLimit(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name, content string
		want          int64
	}{
		{"a v2 limit", "536870912\n", 512 << 20},
		{"v2 without a limit", "max\n", 0},
		{"v1 without a limit", "9223372036854771712\n", 9223372036854771712},
		{"garbage", "lots\n", 0},
		{"empty", "", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-"))
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := readCgroupLimit(path); got != tt.want {
				t.Fatalf("readCgroupLimit(%q) = %d, want %d", tt.content, got, tt.want)
			}
		})
	}
	if got := readCgroupLimit(filepath.Join(dir, "missing")); got != 0 {
		t.Fatalf("a missing file gave %d", got)
	}
}

func TestMemTotal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meminfo")
	if err := os.WriteFile(path, []byte("MemFree:  100 kB\nMemTotal:       2048 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readMemTotal(path); got != 2048<<10 {
		t.Fatalf("readMemTotal = %d", got)
	}
}
