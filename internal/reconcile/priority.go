package reconcile

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// PriorityUrgent is the work-queue priority of the events that move work
// already under way: an Update finished (its Stack turns Ready, its agent's
// place is free), an agent's place came free, an agent is ready for the
// Update that waits for it. Everything else is enqueued at the default
// priority, 0, and the initial listing at controller-runtime's
// handler.LowPriority. In a burst, each controller's queue holds the first
// reconciles of every new object; without the priority, the reconcile that
// finishes a Stack, or hands an agent's place on, waits behind all of
// them, while the places stay empty and the Stacks look unfinished. The
// urgent events are bounded by the work in flight (one Update per agent),
// so they cannot starve the rest.
const PriorityUrgent = 10

// Urgent wraps h so that what it enqueues for any event goes ahead of
// other work, at PriorityUrgent (see there for which events deserve it).
// With a queue that has no priorities it changes nothing.
func Urgent[T any](h handler.TypedEventHandler[T, ctrlreconcile.Request]) handler.TypedEventHandler[T, ctrlreconcile.Request] {
	return urgent[T]{inner: h, update: func(T, T) bool { return true }, rest: true}
}

// UrgentOnUpdate wraps h so that what it enqueues for an update event that
// when accepts goes ahead of other work, at PriorityUrgent; every other
// event keeps its priority. With a queue that has no priorities it changes
// nothing.
func UrgentOnUpdate[T any](h handler.TypedEventHandler[T, ctrlreconcile.Request], when func(old, new T) bool) handler.TypedEventHandler[T, ctrlreconcile.Request] {
	return urgent[T]{inner: h, update: when}
}

// urgent is the handler Urgent and UrgentOnUpdate return.
type urgent[T any] struct {
	inner handler.TypedEventHandler[T, ctrlreconcile.Request]
	// update says which update events are urgent.
	update func(old, new T) bool
	// rest makes create, delete and generic events urgent too.
	rest bool
}

// urgentQueue is q at PriorityUrgent when urgent is set and q has
// priorities, else q.
func urgentQueue(q workqueue.TypedRateLimitingInterface[ctrlreconcile.Request], urgent bool) workqueue.TypedRateLimitingInterface[ctrlreconcile.Request] {
	pq, ok := q.(priorityqueue.PriorityQueue[ctrlreconcile.Request])
	if !urgent || !ok {
		return q
	}
	return atPriority{PriorityQueue: pq, priority: PriorityUrgent}
}

// Create implements handler.TypedEventHandler.
func (u urgent[T]) Create(ctx context.Context, e event.TypedCreateEvent[T], q workqueue.TypedRateLimitingInterface[ctrlreconcile.Request]) {
	u.inner.Create(ctx, e, urgentQueue(q, u.rest && !e.IsInInitialList))
}

// Update implements handler.TypedEventHandler.
func (u urgent[T]) Update(ctx context.Context, e event.TypedUpdateEvent[T], q workqueue.TypedRateLimitingInterface[ctrlreconcile.Request]) {
	u.inner.Update(ctx, e, urgentQueue(q, u.update(e.ObjectOld, e.ObjectNew)))
}

// Delete implements handler.TypedEventHandler.
func (u urgent[T]) Delete(ctx context.Context, e event.TypedDeleteEvent[T], q workqueue.TypedRateLimitingInterface[ctrlreconcile.Request]) {
	u.inner.Delete(ctx, e, urgentQueue(q, u.rest))
}

// Generic implements handler.TypedEventHandler.
func (u urgent[T]) Generic(ctx context.Context, e event.TypedGenericEvent[T], q workqueue.TypedRateLimitingInterface[ctrlreconcile.Request]) {
	u.inner.Generic(ctx, e, urgentQueue(q, u.rest))
}

// atPriority is a priority queue whose additions without a priority of
// their own take priority.
type atPriority struct {
	priorityqueue.PriorityQueue[ctrlreconcile.Request]
	priority int
}

// Add adds item at the queue's priority.
func (q atPriority) Add(item ctrlreconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{}, item)
}

// AddAfter adds item after d at the queue's priority.
func (q atPriority) AddAfter(item ctrlreconcile.Request, d time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{After: d}, item)
}

// AddRateLimited adds item, rate limited, at the queue's priority.
func (q atPriority) AddRateLimited(item ctrlreconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, item)
}

// AddWithOpts adds items at o's priority, or else the queue's.
func (q atPriority) AddWithOpts(o priorityqueue.AddOpts, items ...ctrlreconcile.Request) {
	if o.Priority == nil {
		o.Priority = ptr.To(q.priority)
	}
	q.PriorityQueue.AddWithOpts(o, items...)
}
