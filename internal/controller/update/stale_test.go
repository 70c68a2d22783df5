package update

import (
	"context"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
)

// behindCache is the real API server's client, except that Updates are
// read as they were when the test took their snapshot: a cache that has
// not seen the latest writes yet, the way an informer lags under load.
type behindCache struct {
	client.Client
	updates map[types.NamespacedName]*autov1alpha1.Update
}

// Get serves the snapshot of an Update that has one, else the live object.
func (c behindCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if snap, ok := c.updates[key]; ok {
		if u, ok := obj.(*autov1alpha1.Update); ok {
			snap.DeepCopyInto(u)
			return nil
		}
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// TestStaleCacheDecidesNothing reconciles Updates that have completed
// through a cache that still shows them as they were before: one waiting
// to start (its Workspace serving), one running with no run in this
// process. Waiting Updates are not read from the API server, so the
// reconciler decides on the stale objects; what it decides (start the
// operation again, declare it interrupted) must not be written. Each
// reconcile ends in a quiet requeue, no operation starts, and the outcome
// stays.
func TestStaleCacheDecidesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	stop := f.startManager(Options{})
	f.workspace("ws", nil)

	withFinalizer := func(u *autov1alpha1.Update) { u.Finalizers = []string{autov1alpha1.UpdateFinalizer} }
	waiting := f.createUpdate("waiting", "ws", autov1alpha1.UpType, withFinalizer).DeepCopy()
	u := f.waitComplete("waiting", opTimeout)
	if u.Status.IsFailed() {
		t.Fatalf("the up failed: %s", u.Status.Message)
	}
	running := f.createUpdate("running", "ws", autov1alpha1.RefreshType, withFinalizer).DeepCopy()
	if u := f.waitComplete("running", opTimeout); u.Status.IsFailed() {
		t.Fatalf("the refresh failed: %s", u.Status.Message)
	}
	stop()
	// What a cache that missed the operator's writes holds: the one
	// created, and the other recorded as started.
	running.Status.StartTime = metav1.NewTime(time.Now().Add(-time.Minute))
	apimeta.SetStatusCondition(&running.Status.Conditions, metav1.Condition{
		Type: autov1alpha1.UpdateConditionTypeProgressing, Status: metav1.ConditionTrue, Reason: autov1alpha1.UpdateReasonInProgress,
	})

	before := map[string]*autov1alpha1.Update{"waiting": f.get("waiting"), "running": f.get("running")}
	stale := behindCache{Client: env.Client, updates: map[types.NamespacedName]*autov1alpha1.Update{
		client.ObjectKeyFromObject(waiting): waiting,
		client.ObjectKeyFromObject(running): running,
	}}
	r := &Reconciler{Client: stale, Scheme: env.Scheme, Runtime: f.rt, Recorder: events.NewFakeRecorder(10)}
	for name, live := range before {
		key := types.NamespacedName{Namespace: f.ns, Name: name}
		res, err := r.Reconcile(testContext(t), ctrl.Request{NamespacedName: key})
		if err != nil || res.RequeueAfter != requeueSoon {
			t.Errorf("%s: Reconcile = %+v, %v; want a requeue after %s and no error", name, res, err, requeueSoon)
		}
		if run := r.runs.get(key); run != nil {
			t.Errorf("%s: an operation was started again on a stale Update", name)
		}
		if after := f.get(name); after.ResourceVersion != live.ResourceVersion {
			t.Errorf("%s: the completed Update was written: %s", name, statusJSON(after))
		}
	}
}
