package stack

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/stackyard/stackyard/internal/source"
)

// scriptedPoller answers each branch with the commit (or failure) the test
// set, and counts the queries.
type scriptedPoller struct {
	mu      sync.Mutex
	heads   map[string]string
	failing map[string]bool
	queries map[string]int
}

func newScriptedPoller() *scriptedPoller {
	return &scriptedPoller{heads: map[string]string{}, failing: map[string]bool{}, queries: map[string]int{}}
}

// Latest answers the scripted head of repo's branch.
func (p *scriptedPoller) Latest(_ context.Context, repo, branch string, auth *source.GitAuth, _ time.Duration) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := p.Key(repo, branch, auth)
	p.queries[key]++
	if p.failing[key] {
		return "", errors.New("the remote is down")
	}
	return p.heads[key], nil
}

// Key shares by repository, branch and token.
func (p *scriptedPoller) Key(repo, branch string, auth *source.GitAuth) string {
	token := ""
	if auth != nil {
		token = auth.Token
	}
	return repo + "#" + branch + "#" + token
}

func (p *scriptedPoller) set(key, head string, failing bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.heads[key], p.failing[key] = head, failing
}

// TestBranches drives the branch watch by hand: a clock the test moves and
// pollDue called directly, waiting for its polls. It checks who is woken when a branch moves,
// fails and recovers, that a branch is queried once per interval for all
// its Stacks at their shortest interval, and that Stacks leave it.
func TestBranches(t *testing.T) {
	poller := newScriptedPoller()
	b := newBranches(poller)
	now := time.Unix(1_000_000, 0)
	b.now = func() time.Time { return now }
	ctx := context.Background()
	woken := func() []string {
		var out []string
		for {
			select {
			case ev := <-b.wake:
				out = append(out, ev.Object.Name)
			default:
				slices.Sort(out)
				return out
			}
		}
	}
	step := func(d time.Duration) []string {
		now = now.Add(d)
		b.pollDue(ctx)
		b.polls.Wait()
		return woken()
	}
	stack := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }
	const main = "https://git.example/app#main#"
	poller.set(main, "c1", false)

	if !b.track(stack("a"), "https://git.example/app", "main", nil, "c1", time.Minute) ||
		!b.track(stack("b"), "https://git.example/app", "main", nil, "c1", 2*time.Minute) {
		t.Fatal("track says the branch is not watched")
	}
	if got := step(59 * time.Second); len(got) > 0 || poller.queries[main] != 0 {
		t.Fatalf("before the interval: woke %v after %d queries", got, poller.queries[main])
	}
	// Due after the shortest interval; nothing moved, nobody is woken.
	if got := step(time.Second); len(got) > 0 || poller.queries[main] != 1 {
		t.Fatalf("unchanged branch: woke %v after %d queries, want nobody after 1", got, poller.queries[main])
	}
	// A push wakes both, once.
	poller.set(main, "c2", false)
	if got := step(time.Minute); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after a push woke %v, want a and b", got)
	}
	if got := step(time.Minute); len(got) > 0 {
		t.Fatalf("the same push woke %v again", got)
	}
	// A Stack that reconciled on an older answer is told again.
	b.track(stack("a"), "https://git.example/app", "main", nil, "c1", time.Minute)
	if got := step(time.Minute); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("a Stack behind the branch: woke %v, want a", got)
	}
	// The remote fails: both are woken to say so, once; it recovers: both
	// again.
	poller.set(main, "c2", true)
	if got := step(time.Minute); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("the remote failing woke %v, want a and b", got)
	}
	if got := step(time.Minute); len(got) > 0 {
		t.Fatalf("a lasting failure woke %v again", got)
	}
	poller.set(main, "c2", false)
	if got := step(time.Minute); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("the remote back woke %v, want a and b", got)
	}

	// New credentials move a Stack to another group; forget removes one;
	// an empty group is no longer polled.
	const withToken = "https://git.example/app#main#t0k"
	poller.set(withToken, "c2", false)
	b.track(stack("b"), "https://git.example/app", "main", &source.GitAuth{Token: "t0k"}, "c2", time.Minute)
	b.forget(stack("a"))
	before := poller.queries[main]
	poller.set(withToken, "c3", false)
	if got := step(time.Minute); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("after the move woke %v, want b", got)
	}
	if poller.queries[main] != before {
		t.Errorf("the branch without Stacks was queried %d more times", poller.queries[main]-before)
	}
	b.forget(stack("b"))
	if len(b.groups) != 0 || len(b.byStack) != 0 {
		t.Errorf("after every Stack left: %d groups, %d Stacks", len(b.groups), len(b.byStack))
	}

	var none *branches
	if none.track(stack("c"), "https://git.example/app", "main", nil, "c1", time.Minute) {
		t.Error("a nil watch says it watches")
	}
	none.forget(stack("c"))
}

// cachingPoller answers like source.Poller does: from its last query of the
// key when that began at most maxAge ago (by the test's clock), else with a
// new query.
type cachingPoller struct {
	*scriptedPoller
	now     func() time.Time
	started map[string]time.Time
}

// Latest answers from the last query when it is fresh enough.
func (p *cachingPoller) Latest(ctx context.Context, repo, branch string, auth *source.GitAuth, maxAge time.Duration) (string, error) {
	key := p.Key(repo, branch, auth)
	p.mu.Lock()
	at, ok := p.started[key]
	p.mu.Unlock()
	if ok && p.now().Sub(at) <= maxAge {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.heads[key], nil
	}
	p.mu.Lock()
	p.started[key] = p.now()
	p.mu.Unlock()
	return p.scriptedPoller.Latest(ctx, repo, branch, auth, maxAge)
}

// cachedWatchKey is the poller key of the branch cachedWatch tracks.
const cachedWatchKey = "https://git.example/app#main#"

// cachedWatch returns a branch watch over a cachingPoller, both on a clock
// the test moves through the returned time, with one Stack tracking a
// branch at c1 every minute.
func cachedWatch() (*branches, *cachingPoller, *time.Time) {
	now := new(time.Time)
	*now = time.Unix(1_000_000, 0)
	clock := func() time.Time { return *now }
	poller := &cachingPoller{scriptedPoller: newScriptedPoller(), now: clock, started: map[string]time.Time{}}
	b := newBranches(poller)
	b.now = clock
	poller.set(cachedWatchKey, "c1", false)
	b.track(types.NamespacedName{Namespace: "ns", Name: "a"}, "https://git.example/app", "main", nil, "c1", time.Minute)
	return b, poller, now
}

// TestBranchesAskEveryInterval: a poll that falls due exactly one interval
// after the previous one (as a tick can) queries the remote, rather than
// taking the previous poll's answer as fresh enough and leaving a push
// unseen for a second interval; a fresh answer a Stack's reconcile got in
// between still serves.
func TestBranchesAskEveryInterval(t *testing.T) {
	b, poller, now := cachedWatch()
	ctx := context.Background()
	const main = cachedWatchKey
	step := func(d time.Duration) {
		*now = now.Add(d)
		b.pollDue(ctx)
		b.polls.Wait()
	}
	for i := 1; i <= 3; i++ {
		step(time.Minute)
		if got := poller.queries[main]; got != i {
			t.Fatalf("after %d intervals the remote was asked %d times, want %d", i, got, i)
		}
	}
	// A reconcile asks afresh (a reconcile request) 30 s before the next
	// poll: that poll takes its answer instead of asking again.
	*now = now.Add(30 * time.Second)
	if _, err := poller.Latest(ctx, "https://git.example/app", "main", nil, 0); err != nil {
		t.Fatal(err)
	}
	if got := poller.queries[main]; got != 4 {
		t.Fatalf("the reconcile's fresh query: the remote was asked %d times in all, want 4", got)
	}
	step(30 * time.Second)
	if got := poller.queries[main]; got != 4 {
		t.Errorf("a poll 30 s after a reconcile's query asked again: %d queries in all, want 4", got)
	}
}

// TestBranchesScheduleFromAsking: a poll that waited for a slot schedules
// the next one an interval after it asked, so that the next poll does not
// find its answer fresh and skip the remote for another interval.
func TestBranchesScheduleFromAsking(t *testing.T) {
	b, poller, now := cachedWatch()
	ctx := context.Background()
	const main = cachedWatchKey

	// Every slot is taken (slow remotes): the due poll waits 10 s for one.
	for range branchPolls {
		b.slots <- struct{}{}
	}
	*now = now.Add(time.Minute)
	b.pollDue(ctx)
	*now = now.Add(10 * time.Second) // before the slot is freed, which orders it
	<-b.slots
	b.polls.Wait()
	if got := poller.queries[main]; got != 1 {
		t.Fatalf("the delayed poll asked %d times, want 1", got)
	}
	step := func(d time.Duration) {
		*now = now.Add(d)
		b.pollDue(ctx)
		b.polls.Wait()
	}
	step(50 * time.Second) // an interval after dispatch, 50 s after asking
	step(10 * time.Second) // an interval after asking
	if got := poller.queries[main]; got != 2 {
		t.Errorf("an interval after the delayed poll asked, %d queries in all, want 2", got)
	}
}
