package reconcile

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestWrites(t *testing.T) {
	cm := func(uid types.UID, rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: uid, ResourceVersion: rv}}
	}
	var w Writes
	if w.Behind(cm("u1", "10")) {
		t.Fatal("Behind with nothing recorded")
	}

	// A reconcile that read 10 and changed nothing records nothing.
	w.Record(cm("u1", "10"), []string{"10"})
	if w.Behind(cm("u1", "10")) {
		t.Fatal("Behind after a reconcile that did not write")
	}

	// One that wrote (10 → 11 → 12, metadata then status): a copy at 10
	// or 11 is behind, at 12 it is not, and after that the entry is gone.
	w.Record(cm("u1", "12"), []string{"10", "11", "12"})
	if !w.Behind(cm("u1", "10")) {
		t.Error("the copy the write started from is not behind")
	}
	if !w.Behind(cm("u1", "11")) {
		t.Error("the copy between the metadata and the status patch is not behind")
	}
	if !w.Behind(cm("u1", "10")) {
		t.Error("Behind forgot the write while the cache was still behind")
	}
	if w.Behind(cm("u1", "12")) {
		t.Error("the written copy is behind")
	}
	if w.Behind(cm("u1", "10")) {
		t.Error("the entry outlived the cache catching up")
	}

	// A new object of the same name (another UID) at the same version
	// string is not the written one.
	w.Record(cm("u1", "20"), []string{"15", "20"})
	if w.Behind(cm("u2", "15")) {
		t.Error("another object of the same name is behind")
	}

	// Forget drops the entry; an unread version records nothing.
	w.Record(cm("u1", "30"), []string{"25", "30"})
	w.Forget(types.NamespacedName{Namespace: "ns", Name: "a"})
	if w.Behind(cm("u1", "25")) {
		t.Error("Behind after Forget")
	}
	w.Record(cm("u1", "30"), []string{""})
	if w.Behind(cm("u1", "")) {
		t.Error("a write from an unknown version is remembered")
	}
}
