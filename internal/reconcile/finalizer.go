package reconcile

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HasFinalizer reports whether obj carries the finalizer name.
func HasFinalizer(obj metav1.Object, name string) bool {
	return slices.Contains(obj.GetFinalizers(), name)
}

// AddFinalizer adds the finalizer name to obj unless it is there already,
// and reports whether it changed obj. A controller adds its finalizer first
// and requeues when this returns true, so that creation and deletion cannot
// race; the Patcher writes the change.
func AddFinalizer(obj metav1.Object, name string) bool {
	if HasFinalizer(obj, name) {
		return false
	}
	obj.SetFinalizers(append(obj.GetFinalizers(), name))
	return true
}

// RemoveFinalizer removes every occurrence of the finalizer name from obj
// and reports whether it changed obj.
func RemoveFinalizer(obj metav1.Object, name string) bool {
	old := obj.GetFinalizers()
	kept := slices.DeleteFunc(slices.Clone(old), func(f string) bool { return f == name })
	if len(kept) == len(old) {
		return false
	}
	if len(kept) == 0 {
		kept = nil
	}
	obj.SetFinalizers(kept)
	return true
}
