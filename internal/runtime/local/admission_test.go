package local

import (
	"os"
	"path/filepath"
	"slices"
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
		ahead  int
		wakes  []string
		counts [2]int
	}
	for i, s := range []step{
		{op: "acquire", name: "a", ok: true, counts: [2]int{1, 0}},
		{op: "acquire", name: "a", ok: true, counts: [2]int{1, 0}}, // holding already
		{op: "acquire", name: "b", ok: true, counts: [2]int{2, 0}},
		// c queues first: the line starts, and the holders are woken to
		// give their places up if idle. d behind it wakes nobody.
		{op: "acquire", name: "c", ahead: 0, wakes: []string{"a", "b"}, counts: [2]int{2, 1}},
		{op: "acquire", name: "d", ahead: 1, counts: [2]int{2, 2}},
		{op: "acquire", name: "c", ahead: 0, counts: [2]int{2, 2}}, // its place in line is kept
		// a frees a place: c, first in line, is woken; d may not overtake.
		{op: "release", name: "a", wakes: []string{"c"}, counts: [2]int{1, 2}},
		{op: "acquire", name: "d", ahead: 1, counts: [2]int{1, 2}},
		{op: "acquire", name: "c", ok: true, counts: [2]int{2, 1}},
		{op: "release", name: "b", wakes: []string{"d"}, counts: [2]int{1, 1}},
		{op: "acquire", name: "d", ok: true, counts: [2]int{2, 0}},
		// Leaving the line (idled before its turn) with no place free
		// wakes nobody.
		{op: "acquire", name: "e", ahead: 0, wakes: []string{"c", "d"}, counts: [2]int{2, 1}},
		{op: "release", name: "e", counts: [2]int{2, 0}},
		{op: "release", name: "unknown", counts: [2]int{2, 0}},
		// With a place free, whoever is first after one that leaves the
		// line is woken.
		{op: "acquire", name: "f", ahead: 0, wakes: []string{"c", "d"}, counts: [2]int{2, 1}},
		{op: "acquire", name: "g", ahead: 1, counts: [2]int{2, 2}},
		{op: "release", name: "c", wakes: []string{"f"}, counts: [2]int{1, 2}},
		{op: "release", name: "f", wakes: []string{"g"}, counts: [2]int{1, 1}},
	} {
		switch s.op {
		case "acquire":
			ok, ahead := a.acquire(key(s.name))
			if ok != s.ok || ahead != s.ahead {
				t.Fatalf("step %d: acquire(%s) = %v, %d; want %v, %d", i, s.name, ok, ahead, s.ok, s.ahead)
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
		if ok, _ := free.acquire(key(n)); !ok {
			t.Fatalf("an unbounded admission refused %s", n)
		}
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
