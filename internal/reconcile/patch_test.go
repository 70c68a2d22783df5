package reconcile

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestMergeDiff(t *testing.T) {
	tests := []struct {
		name     string
		old, new map[string]any
		want     map[string]any
	}{
		{name: "equal", old: map[string]any{"a": "1"}, new: map[string]any{"a": "1"}, want: map[string]any{}},
		{name: "both empty", old: nil, new: nil, want: map[string]any{}},
		{name: "changed", old: map[string]any{"a": "1", "b": "2"}, new: map[string]any{"a": "x", "b": "2"}, want: map[string]any{"a": "x"}},
		{name: "added", old: map[string]any{}, new: map[string]any{"a": int64(1)}, want: map[string]any{"a": int64(1)}},
		{name: "removed is null", old: map[string]any{"a": "1", "b": "2"}, new: map[string]any{"b": "2"}, want: map[string]any{"a": nil}},
		{
			name: "nested objects diff recursively",
			old:  map[string]any{"status": map[string]any{"phase": "A", "message": "m", "gone": true}},
			new:  map[string]any{"status": map[string]any{"phase": "B", "message": "m"}},
			want: map[string]any{"status": map[string]any{"phase": "B", "gone": nil}},
		},
		{
			name: "unchanged nested object is left out",
			old:  map[string]any{"status": map[string]any{"phase": "A"}, "x": "1"},
			new:  map[string]any{"status": map[string]any{"phase": "A"}, "x": "2"},
			want: map[string]any{"x": "2"},
		},
		{
			name: "arrays are replaced whole",
			old:  map[string]any{"finalizers": []any{"a", "b"}},
			new:  map[string]any{"finalizers": []any{"a"}},
			want: map[string]any{"finalizers": []any{"a"}},
		},
		{
			name: "object replacing a scalar is written whole",
			old:  map[string]any{"a": "1"},
			new:  map[string]any{"a": map[string]any{"b": "2"}},
			want: map[string]any{"a": map[string]any{"b": "2"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, mergeDiff(tt.old, tt.new)); diff != "" {
				t.Errorf("mergeDiff (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPatcherMetadata patches labels, annotations and finalizers of a
// ConfigMap on a real API server, and checks that what the controller did
// not change (data, a label someone else added meanwhile) is left alone.
func TestPatcherMetadata(t *testing.T) {
	e := testEnv(t)
	ctx := context.Background()
	ns := testNamespace(t, e)

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: "meta", Namespace: ns,
			Labels:      map[string]string{"keep": "1", "change": "old", "drop": "1"},
			Annotations: map[string]string{"note": "a"},
		},
		Data: map[string]string{"k": "v"},
	}
	mustCreate(t, e.Client, cm)

	patcher := NewPatcher(e.Client, cm)
	// Someone else adds a label after our snapshot; a merge patch of our
	// changes alone must not remove it.
	other := &corev1.ConfigMap{}
	mustGet(t, e.Client, cm, other)
	other.Labels["theirs"] = "1"
	if err := e.Client.Update(ctx, other); err != nil {
		t.Fatalf("concurrent update: %v", err)
	}

	cm.Labels["change"] = "new"
	delete(cm.Labels, "drop")
	cm.Labels["added"] = "1"
	cm.Annotations = nil
	cm.Data["k"] = "not written" // not metadata: the patcher leaves it
	if err := patcher.Patch(ctx, cm); err != nil {
		t.Fatalf("Patch: %v", err)
	}

	got := &corev1.ConfigMap{}
	mustGet(t, e.Client, cm, got)
	wantLabels := map[string]string{"keep": "1", "change": "new", "added": "1", "theirs": "1"}
	if diff := cmp.Diff(wantLabels, got.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if len(got.Annotations) != 0 {
		t.Errorf("annotations = %v, want none", got.Annotations)
	}
	if got.Data["k"] != "v" {
		t.Errorf("data = %v, want it untouched", got.Data)
	}
	if cm.ResourceVersion != got.ResourceVersion {
		t.Errorf("obj's resourceVersion %s was not updated to %s", cm.ResourceVersion, got.ResourceVersion)
	}

	// Nothing changed since: Patch sends nothing.
	rv := got.ResourceVersion
	if err := patcher.Patch(ctx, cm); err != nil {
		t.Fatalf("second Patch: %v", err)
	}
	mustGet(t, e.Client, cm, got)
	if got.ResourceVersion != rv {
		t.Errorf("an unchanged object was written: resourceVersion %s -> %s", rv, got.ResourceVersion)
	}
}

// TestPatcherFinalizerConflict checks that a finalizer change made on a
// stale object fails with a conflict rather than overwrite the list.
func TestPatcherFinalizerConflict(t *testing.T) {
	e := testEnv(t)
	ctx := context.Background()
	ns := testNamespace(t, e)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fin", Namespace: ns}}
	mustCreate(t, e.Client, cm)
	patcher := NewPatcher(e.Client, cm)

	other := &corev1.ConfigMap{}
	mustGet(t, e.Client, cm, other)
	AddFinalizer(other, "example.com/theirs")
	if err := e.Client.Update(ctx, other); err != nil {
		t.Fatalf("concurrent update: %v", err)
	}

	if !AddFinalizer(cm, testFinalizer) {
		t.Fatal("AddFinalizer reported no change")
	}
	err := patcher.Patch(ctx, cm)
	if !apierrors.IsConflict(err) {
		t.Fatalf("Patch error = %v, want a conflict", err)
	}

	// After re-reading, the same change goes through and keeps theirs.
	fresh := &corev1.ConfigMap{}
	mustGet(t, e.Client, cm, fresh)
	patcher = NewPatcher(e.Client, fresh)
	AddFinalizer(fresh, testFinalizer)
	if err := patcher.Patch(ctx, fresh); err != nil {
		t.Fatalf("Patch: %v", err)
	}
	got := &corev1.ConfigMap{}
	mustGet(t, e.Client, cm, got)
	if want := []string{"example.com/theirs", testFinalizer}; !slices.Equal(got.Finalizers, want) {
		t.Errorf("finalizers = %v, want %v", got.Finalizers, want)
	}
}

// TestPatcherStatus patches a Pod's status subresource together with its
// metadata, then removes what it added.
func TestPatcherStatus(t *testing.T) {
	e := testEnv(t)
	ctx := context.Background()
	ns := testNamespace(t, e)

	pod := newPod(ns, "status")
	mustCreate(t, e.Client, pod)

	patcher := NewPatcher(e.Client, pod)
	AddFinalizer(pod, testFinalizer)
	pod.Status.Message = "reconciled"
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
		Type: "stackyard.io/Test", Status: corev1.ConditionTrue, Reason: "Testing", LastTransitionTime: metav1.Now(),
	})
	if err := patcher.Patch(ctx, pod); err != nil {
		t.Fatalf("Patch: %v", err)
	}
	if pod.Status.Message != "reconciled" || !HasFinalizer(pod, testFinalizer) {
		t.Errorf("obj after Patch: message %q, finalizers %v", pod.Status.Message, pod.Finalizers)
	}

	got := &corev1.Pod{}
	mustGet(t, e.Client, pod, got)
	if got.Status.Message != "reconciled" || len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Reason != "Testing" {
		t.Errorf("stored status = %+v", got.Status)
	}
	if !HasFinalizer(got, testFinalizer) {
		t.Errorf("stored finalizers = %v", got.Finalizers)
	}

	// Removing fields writes nulls and shorter lists.
	pod.Status.Message = ""
	pod.Status.Conditions = nil
	RemoveFinalizer(pod, testFinalizer)
	if err := patcher.Patch(ctx, pod); err != nil {
		t.Fatalf("second Patch: %v", err)
	}
	mustGet(t, e.Client, pod, got)
	if got.Status.Message != "" || len(got.Status.Conditions) != 0 || len(got.Finalizers) != 0 {
		t.Errorf("stored after removal: message %q, conditions %v, finalizers %v", got.Status.Message, got.Status.Conditions, got.Finalizers)
	}
}

// TestPatcherLocked checks that a Locked Patcher's status patch made on a
// stale object (as read from a cache that is behind) fails with a conflict
// instead of overwriting the newer status, that its metadata and status
// patches go through together on a fresh object, and that an unlocked
// Patcher writes the stale status (which is what Locked is for).
func TestPatcherLocked(t *testing.T) {
	e := testEnv(t)
	ctx := context.Background()
	ns := testNamespace(t, e)

	pod := newPod(ns, "locked")
	mustCreate(t, e.Client, pod)
	stale := pod.DeepCopy()
	pod.Status.Message = "finished"
	if err := e.Client.Status().Update(ctx, pod); err != nil {
		t.Fatalf("the newer status: %v", err)
	}

	locked := NewPatcher(e.Client, stale).Locked()
	stale.Status.Message = "waiting"
	err := locked.Patch(ctx, stale)
	if !apierrors.IsConflict(err) {
		t.Fatalf("locked Patch of a stale object: error = %v, want a conflict", err)
	}
	got := &corev1.Pod{}
	mustGet(t, e.Client, pod, got)
	if got.Status.Message != "finished" {
		t.Fatalf("stored message = %q after a refused patch, want %q", got.Status.Message, "finished")
	}

	// Read again, the same change goes through, metadata and status both:
	// the status patch carries the version the metadata patch made.
	patcher := NewPatcher(e.Client, got).Locked()
	got.Labels = map[string]string{"seen": "yes"}
	got.Status.Message = "waiting"
	if err := patcher.Patch(ctx, got); err != nil {
		t.Fatalf("locked Patch of a fresh object: %v", err)
	}
	mustGet(t, e.Client, pod, got)
	if got.Status.Message != "waiting" || got.Labels["seen"] != "yes" {
		t.Errorf("stored: message %q, labels %v", got.Status.Message, got.Labels)
	}

	// Unlocked, the stale object's message wins: the check above is real.
	stale = got.DeepCopy()
	got.Status.Message = "finished again"
	if err := e.Client.Status().Update(ctx, got); err != nil {
		t.Fatalf("the newer status: %v", err)
	}
	unlocked := NewPatcher(e.Client, stale)
	stale.Status.Message = "stale"
	if err := unlocked.Patch(ctx, stale); err != nil {
		t.Fatalf("unlocked Patch: %v", err)
	}
	mustGet(t, e.Client, pod, got)
	if got.Status.Message != "stale" {
		t.Errorf("unlocked: stored message %q, want the stale object's", got.Status.Message)
	}
}

// TestPatcherDeletedMeanwhile checks that removing the last finalizer of a
// deleting object (which then disappears before its status can be patched),
// and patching an object someone else deleted, are not errors.
func TestPatcherDeletedMeanwhile(t *testing.T) {
	e := testEnv(t)
	ctx := context.Background()
	ns := testNamespace(t, e)

	t.Run("last finalizer removed", func(t *testing.T) {
		pod := newPod(ns, "finalized")
		pod.Finalizers = []string{testFinalizer}
		mustCreate(t, e.Client, pod)
		if err := e.Client.Delete(ctx, pod); err != nil {
			t.Fatalf("delete: %v", err)
		}
		mustGet(t, e.Client, pod, pod)
		if pod.DeletionTimestamp == nil {
			t.Fatal("the pod is not being deleted")
		}
		patcher := NewPatcher(e.Client, pod)
		RemoveFinalizer(pod, testFinalizer)
		pod.Status.Message = "cleaned up"
		if err := patcher.Patch(ctx, pod); err != nil {
			t.Fatalf("Patch: %v", err)
		}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
			t.Errorf("Get after Patch = %v, want NotFound", err)
		}
		if !patcher.Gone() {
			t.Error("Gone() = false after the patch found the pod deleted")
		}
	})

	t.Run("deleted by someone else", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: ns}}
		mustCreate(t, e.Client, cm)
		patcher := NewPatcher(e.Client, cm)
		cm.Labels = map[string]string{"early": "1"}
		if err := patcher.Patch(ctx, cm); err != nil || patcher.Gone() {
			t.Fatalf("Patch of a live object: err %v, Gone() %v", err, patcher.Gone())
		}
		if v := patcher.Versions(); len(v) != 2 || v[1] != cm.ResourceVersion || v[0] == v[1] {
			t.Errorf("Versions() = %q after one patch, want the snapshot's and %s", v, cm.ResourceVersion)
		}
		if err := e.Client.Delete(ctx, cm); err != nil {
			t.Fatalf("delete: %v", err)
		}
		cm.Labels = map[string]string{"late": "1"}
		if err := patcher.Patch(ctx, cm); err != nil {
			t.Fatalf("Patch: %v", err)
		}
		if !patcher.Gone() {
			t.Error("Gone() = false after the patch found the object deleted")
		}
	})
}

// newPod returns an unscheduled pod; no kubelet runs it, and with no node
// it is deleted at once when its finalizers are gone.
func newPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "example.invalid/none"}}},
	}
}

func mustCreate(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func mustGet(t *testing.T, c client.Client, key, into client.Object) {
	t.Helper()
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(key), into); err != nil {
		t.Fatalf("getting %s: %v", key.GetName(), err)
	}
}
