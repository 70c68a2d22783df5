package reconcile

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// obj is a Stack named name at resource version rv.
func obj(name, rv string) client.Object {
	return &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

// TestUrgent sends events through wrapped and plain handlers into a real
// priority queue and reads back which comes out first, at what priority.
func TestUrgent(t *testing.T) {
	plain := &handler.EnqueueRequestForObject{}
	finished := func(_, new client.Object) bool { return new.GetResourceVersion() == "done" }
	onUpdate := UrgentOnUpdate[client.Object](&handler.EnqueueRequestForObject{}, finished)
	always := Urgent[client.Object](&handler.EnqueueRequestForObject{})
	ctx := context.Background()
	type send func(q workqueue.TypedRateLimitingInterface[ctrlreconcile.Request])
	update := func(h handler.EventHandler, name, rv string) send {
		return func(q workqueue.TypedRateLimitingInterface[ctrlreconcile.Request]) {
			h.Update(ctx, event.UpdateEvent{ObjectOld: obj(name, "1"), ObjectNew: obj(name, rv)}, q)
		}
	}
	create := func(h handler.EventHandler, name string, initial bool) send {
		return func(q workqueue.TypedRateLimitingInterface[ctrlreconcile.Request]) {
			h.Create(ctx, event.CreateEvent{Object: obj(name, "1"), IsInInitialList: initial}, q)
		}
	}
	generic := func(h handler.EventHandler, name string) send {
		return func(q workqueue.TypedRateLimitingInterface[ctrlreconcile.Request]) {
			h.Generic(ctx, event.GenericEvent{Object: obj(name, "1")}, q)
		}
	}
	tests := []struct {
		name     string
		sends    []send
		first    string
		priority int
	}{
		{name: "plain events keep their order", sends: []send{create(plain, "a", false), update(plain, "b", "done")}, first: "a", priority: 0},
		{name: "a finish goes first", sends: []send{create(plain, "a", false), update(onUpdate, "b", "done")}, first: "b", priority: PriorityUrgent},
		{name: "another update does not", sends: []send{create(plain, "a", false), update(onUpdate, "b", "2")}, first: "a", priority: 0},
		{name: "UrgentOnUpdate leaves creates alone", sends: []send{create(plain, "a", false), create(onUpdate, "b", false)}, first: "a", priority: 0},
		{name: "generic events through Urgent go first", sends: []send{create(plain, "a", false), generic(always, "b")}, first: "b", priority: PriorityUrgent},
		{name: "the initial listing is never urgent", sends: []send{create(always, "b", true), create(plain, "a", false)}, first: "a", priority: 0},
		{name: "an urgent event raises an item already queued", sends: []send{create(plain, "a", false), create(plain, "b", false), update(onUpdate, "b", "done")}, first: "b", priority: PriorityUrgent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := priorityqueue.New[ctrlreconcile.Request]("test")
			defer q.ShutDown()
			for _, s := range tt.sends {
				s(q)
			}
			item, priority, _ := q.GetWithPriority()
			if item.Name != tt.first || priority != tt.priority {
				t.Errorf("first out: %s at priority %d; want %s at %d", item.Name, priority, tt.first, tt.priority)
			}
		})
	}
}

// TestUrgentPlainQueue shows that on a queue without priorities the
// wrapped handler still enqueues.
func TestUrgentPlainQueue(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[ctrlreconcile.Request]())
	defer q.ShutDown()
	Urgent[client.Object](&handler.EnqueueRequestForObject{}).Generic(context.Background(), event.GenericEvent{Object: obj("a", "1")}, q)
	if q.Len() != 1 {
		t.Fatalf("queue length %d, want 1", q.Len())
	}
	if item, _ := q.Get(); item.Name != "a" {
		t.Errorf("got %v, want a", item)
	}
}
