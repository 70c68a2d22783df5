package stack

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/source"
)

// branchTick is how often the branch watch looks for a branch due a poll.
// Polls themselves run at the Stacks' resync intervals.
const branchTick = time.Second

// branchPolls is how many branches are polled at once: a slow remote holds
// one of them, not the others' polls.
const branchPolls = 8

// branches polls each branch the Stacks track once per interval, for all of
// them, and wakes the Stacks a poll finds behind: those that last saw
// another commit, or saw the branch when it now fails. Stacks that track a
// branch therefore need no timer of their own to notice a push: the
// decision's WatchedResync is a long safety net. A thousand Stacks on one
// branch cost one query and no reconcile per interval, where each of them
// reconciled to ask the shared poller before.
//
// A Stack enrols at every reconcile that polls its branch (track), with the
// commit it saw and its credentials, and leaves when it stops tracking one,
// is deleted or leaves the shard (forget). What is lost on a restart is
// rebuilt by the first reconcile of every Stack.
type branches struct {
	poller GitPoller
	now    func() time.Time
	wake   chan event.TypedGenericEvent[*pulumiv1.Stack]

	// slots bounds the polls in flight (branchPolls); polls counts them,
	// for Start's return and the tests.
	slots chan struct{}
	polls sync.WaitGroup

	mu      sync.Mutex
	groups  map[string]*branchGroup
	byStack map[types.NamespacedName]string // Stack → its group's key
}

// branchGroup is one branch, as read with one set of credentials (the
// poller's sharing key), and the Stacks that track it.
type branchGroup struct {
	repo, branch string
	auth         *source.GitAuth
	// members maps each Stack to what it last saw: a commit, or "" when
	// its poll failed.
	members map[types.NamespacedName]branchMember
	// next is when the branch is due its next poll.
	next time.Time
	// polling is set while a poll of the branch is in flight.
	polling bool
}

// branchMember is one Stack of a group: the commit it saw, and its
// interval (the group polls at the shortest).
type branchMember struct {
	seen     string
	interval time.Duration
}

// newBranches returns an empty watch that polls through poller.
func newBranches(poller GitPoller) *branches {
	return &branches{
		poller:  poller,
		now:     time.Now,
		wake:    make(chan event.TypedGenericEvent[*pulumiv1.Stack], 1024),
		slots:   make(chan struct{}, branchPolls),
		groups:  map[string]*branchGroup{},
		byStack: map[types.NamespacedName]string{},
	}
}

// track enrols stack in the group of repo and branch read with auth, as
// having seen commit ("" when its poll failed), to be looked at every
// interval. It moves the Stack out of the group it was in, if another. It
// reports whether the branch is watched: false on a nil watch (a
// Reconciler not set up with a manager), whose Stacks poll on their own
// timers.
func (b *branches) track(stack types.NamespacedName, repo, branch string, auth *source.GitAuth, commit string, interval time.Duration) bool {
	if b == nil {
		return false
	}
	key := b.poller.Key(repo, branch, auth)
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.byStack[stack]; ok && old != key {
		b.leave(stack, old)
	}
	g := b.groups[key]
	if g == nil {
		g = &branchGroup{repo: repo, branch: branch, members: map[types.NamespacedName]branchMember{}, next: b.now().Add(interval)}
		b.groups[key] = g
	}
	// The latest credentials of the key: equal to the others' by the
	// key's construction.
	g.auth = auth
	g.members[stack] = branchMember{seen: commit, interval: interval}
	if next := b.now().Add(interval); next.Before(g.next) {
		g.next = next
	}
	b.byStack[stack] = key
	return true
}

// forget removes stack from the watch; nothing on a nil watch.
func (b *branches) forget(stack types.NamespacedName) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if key, ok := b.byStack[stack]; ok {
		b.leave(stack, key)
	}
}

// leave removes stack from the group key, and the group once empty. The
// caller holds mu.
func (b *branches) leave(stack types.NamespacedName, key string) {
	delete(b.byStack, stack)
	if g := b.groups[key]; g != nil {
		delete(g.members, stack)
		if len(g.members) == 0 {
			delete(b.groups, key)
		}
	}
}

// Start polls the branches that are due every branchTick until ctx ends.
// It runs under the manager, on the leader only, beside the controller the
// wakes are for.
func (b *branches) Start(ctx context.Context) error {
	t := time.NewTicker(branchTick)
	defer t.Stop()
	defer b.polls.Wait()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			b.pollDue(ctx)
		}
	}
}

// pollDue starts a poll of every branch whose time has come and that is
// not being polled, at most branchPolls at once, each waking the members
// it finds behind. It does not wait for them (polls does).
func (b *branches) pollDue(ctx context.Context) {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	for key, g := range b.groups {
		if g.polling || now.Before(g.next) {
			continue
		}
		interval := g.interval()
		g.next, g.polling = now.Add(interval), true
		b.polls.Add(1)
		go b.poll(ctx, key, g.repo, g.branch, g.auth, interval)
	}
}

// poll queries one branch through the shared poller (a Stack reconciling
// meanwhile shares the query) and wakes the members it finds behind.
func (b *branches) poll(ctx context.Context, key, repo, branch string, auth *source.GitAuth, interval time.Duration) {
	defer b.polls.Done()
	defer func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if g := b.groups[key]; g != nil {
			g.polling = false
		}
	}()
	select {
	case b.slots <- struct{}{}:
		defer func() { <-b.slots }()
	case <-ctx.Done():
		return
	}
	// The next poll falls due an interval after this query is asked, not
	// after it was dispatched: a wait for a slot must not bring the next
	// poll closer to this one (see pollMaxAge). The interval is the
	// group's now, shorter if a Stack joined with a shorter one meanwhile.
	b.mu.Lock()
	if g := b.groups[key]; g != nil {
		g.next = b.now().Add(g.interval())
	}
	b.mu.Unlock()
	commit, err := b.poller.Latest(ctx, repo, branch, auth, pollMaxAge(interval))
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		// The Stacks say why in their status; waking them once is enough,
		// as a failing Stack polls on its own timer.
		log.FromContext(ctx).V(1).Info("polling a tracked branch failed", "repository", repo, "branch", branch, "error", err.Error())
		commit = ""
	}
	for _, stack := range b.behind(key, commit) {
		if !b.notify(ctx, stack) {
			return
		}
	}
}

// pollMaxAge is how old an answer a due poll of a branch polled every
// interval accepts: one a Stack's reconcile got less than an interval
// less a tick ago, but never the watch's own previous poll, which was
// asked at least an interval ago (poll schedules the next one from the
// moment it asks). Accepting answers a whole interval old would, now and
// then, take that previous poll (a tick can fall exactly one interval
// later) and leave the branch unasked for two intervals. At intervals of a
// tick or less every poll asks.
func pollMaxAge(interval time.Duration) time.Duration {
	return max(interval-branchTick, 0)
}

// behind returns the members of group key that did not see commit, and
// records that they have now been told.
func (b *branches) behind(key, commit string) []types.NamespacedName {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.groups[key]
	if g == nil {
		return nil
	}
	var out []types.NamespacedName
	for stack, m := range g.members {
		if m.seen != commit {
			out = append(out, stack)
			m.seen = commit
			g.members[stack] = m
		}
	}
	return out
}

// interval is the shortest interval of the group's members.
func (g *branchGroup) interval() time.Duration {
	var shortest time.Duration
	for _, m := range g.members {
		if shortest == 0 || m.interval < shortest {
			shortest = m.interval
		}
	}
	return shortest
}

// notify asks for a reconcile of stack. It waits for room in the queue,
// since a Stack not told would wait for its safety resync; it returns false
// when ctx ends first.
func (b *branches) notify(ctx context.Context, stack types.NamespacedName) bool {
	obj := &pulumiv1.Stack{}
	obj.Namespace, obj.Name = stack.Namespace, stack.Name
	select {
	case b.wake <- event.TypedGenericEvent[*pulumiv1.Stack]{Object: obj}:
		return true
	case <-ctx.Done():
		return false
	}
}
