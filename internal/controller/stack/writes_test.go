package stack

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// cachedCopy is a client whose cache holds one Stack, as it was at some
// version, and which records what the reconciler tries to write instead
// of sending it.
type cachedCopy struct {
	client.Client
	stack  *pulumiv1.Stack
	writes []string
}

// errRecorded answers every write, and every read but the Stack's.
var errRecorded = errors.New("recorded, not sent")

// Get serves the cached Stack.
func (c *cachedCopy) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if s, ok := obj.(*pulumiv1.Stack); ok && key == client.ObjectKeyFromObject(c.stack) {
		c.stack.DeepCopyInto(s)
		return nil
	}
	return errRecorded
}

// Patch records the patch.
func (c *cachedCopy) Patch(_ context.Context, obj client.Object, _ client.Patch, _ ...client.PatchOption) error {
	c.writes = append(c.writes, "patch "+obj.GetName())
	return errRecorded
}

// Status records status patches.
func (c *cachedCopy) Status() client.SubResourceWriter { return statusWriter{c: c} }

// statusWriter records status patches; the reconciler sends no other
// status write.
type statusWriter struct {
	client.SubResourceWriter
	c *cachedCopy
}

// Patch records the status patch.
func (w statusWriter) Patch(_ context.Context, obj client.Object, _ client.Patch, _ ...client.SubResourcePatchOption) error {
	w.c.writes = append(w.c.writes, "patch status "+obj.GetName())
	return errRecorded
}

// TestBehindCacheWaits reconciles a Stack whose cached copy is the one
// the reconciler's own last write started from: the reconcile sends
// nothing and comes back soon. Once the cache shows anything else, the
// same reconciler goes to work (here: the finalizer, refused by the
// recording client).
func TestBehindCacheWaits(t *testing.T) {
	old := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", UID: types.UID("u1"), ResourceVersion: "10", Generation: 1},
		Spec:       shared.StackSpec{Stack: "dev"},
	}
	written := old.DeepCopy()
	written.ResourceVersion = "12"
	c := &cachedCopy{stack: old}
	r := &Reconciler{Client: c}
	r.writes.Record(written, []string{old.ResourceVersion, written.ResourceVersion})
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(old)}

	res, err := r.Reconcile(context.Background(), req)
	if err != nil || res.RequeueAfter != requeueSoon || len(c.writes) > 0 {
		t.Fatalf("on the copy behind: Reconcile = %+v, %v, writes %q; want a requeue after %s and nothing sent", res, err, c.writes, requeueSoon)
	}

	c.stack = written
	_, _ = r.Reconcile(context.Background(), req)
	if len(c.writes) == 0 {
		t.Fatal("on the written copy the reconcile sent nothing: the test shows nothing")
	}
}
