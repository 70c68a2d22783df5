package reconcile

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Writes remembers, per object, the versions an object passed through
// while a reconcile wrote it, so that a later reconcile can tell it is
// looking at a cache that has not seen the last write yet.
//
// A controller wakes on other objects' events (an owned object's status)
// as well as its own, and can be woken a few milliseconds after writing
// its object, before the watch has brought the write into the cache. A
// reconcile on that older copy decides again what the last one decided:
// it creates what exists (a conflict), announces it again (a second event)
// and patches from a base that lacks the last write (a status patch that
// changes nothing). Comparing resourceVersions for order is not allowed,
// but equality is: a cached copy whose resourceVersion is one the writing
// reconcile read or passed through (its metadata patch, before its status
// patch) is older than the write.
//
// The zero value is ready to use. Entries are dropped once the cache shows
// something else, and when the object is gone (Forget).
type Writes struct {
	m sync.Map // types.NamespacedName → *written
}

// written is one remembered write: the object (UID) and the versions older
// than the write.
type written struct {
	uid   types.UID
	older []string
}

// Record notes that a reconcile left the object as obj, after it had the
// versions (Patcher.Versions, oldest first): if any differs from obj's,
// that reconcile wrote it, and a copy at one of them is behind.
func (w *Writes) Record(obj client.Object, versions []string) {
	current := obj.GetResourceVersion()
	var older []string
	for _, v := range versions {
		if v != "" && v != current {
			older = append(older, v)
		}
	}
	if len(older) == 0 {
		return
	}
	w.m.Store(client.ObjectKeyFromObject(obj), &written{uid: obj.GetUID(), older: older})
}

// Behind reports whether obj, as read from the cache, is older than the
// last write Recorded for it. A copy that is not forgets the entry.
func (w *Writes) Behind(obj client.Object) bool {
	key := client.ObjectKeyFromObject(obj)
	v, ok := w.m.Load(key)
	if !ok {
		return false
	}
	last := v.(*written)
	if last.uid == obj.GetUID() && slices.Contains(last.older, obj.GetResourceVersion()) {
		return true
	}
	w.m.CompareAndDelete(key, v)
	return false
}

// Forget drops what is remembered of the object key (deleted).
func (w *Writes) Forget(key types.NamespacedName) { w.m.Delete(key) }
