package reconcile

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// EventRecordDeleted is the reason of the event that says a record was
// deleted.
const EventRecordDeleted = "RecordDeleted"

// Deletion describes, for a deleted record obj, the object the event goes
// on (its pipeline, its stage) and what the event says; a nil object means
// nothing to say (the owner went too).
type Deletion func(ctx context.Context, obj client.Object) (regarding client.Object, note string)

// RecordDeletions is an event handler that enqueues nothing: it makes every
// deletion of a record leave a Normal event, RecordDeleted, on the object
// describe names, whoever deleted it (retention, or a person with the
// right to); the API server's audit log says who.
func RecordDeletions(recorder events.EventRecorder, describe Deletion) handler.EventHandler {
	return handler.Funcs{
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[ctrlreconcile.Request]) {
			if recorder == nil || e.Object == nil {
				return
			}
			if regarding, note := describe(ctx, e.Object); regarding != nil {
				recorder.Eventf(regarding, e.Object, corev1.EventTypeNormal, EventRecordDeleted, "Delete", "%s", note)
			}
		},
	}
}
