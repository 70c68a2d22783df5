package reconcile

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const testFinalizer = "stackyard.io/finalizer"

func TestFinalizers(t *testing.T) {
	tests := []struct {
		name        string
		start       []string
		op          func(metav1.Object) bool
		want        []string
		wantChanged bool
	}{
		{name: "add to none", start: nil, op: add, want: []string{testFinalizer}, wantChanged: true},
		{name: "add beside another", start: []string{"other"}, op: add, want: []string{"other", testFinalizer}, wantChanged: true},
		{name: "add present", start: []string{testFinalizer}, op: add, want: []string{testFinalizer}, wantChanged: false},
		{name: "remove present", start: []string{"other", testFinalizer}, op: remove, want: []string{"other"}, wantChanged: true},
		{name: "remove the last", start: []string{testFinalizer}, op: remove, want: nil, wantChanged: true},
		{name: "remove duplicates", start: []string{testFinalizer, "other", testFinalizer}, op: remove, want: []string{"other"}, wantChanged: true},
		{name: "remove absent", start: []string{"other"}, op: remove, want: []string{"other"}, wantChanged: false},
		{name: "remove from none", start: nil, op: remove, want: nil, wantChanged: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := slices.Clone(tt.start)
			obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Finalizers: start}}
			if changed := tt.op(obj); changed != tt.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tt.wantChanged)
			}
			if got := obj.GetFinalizers(); !slices.Equal(got, tt.want) {
				t.Errorf("finalizers = %v, want %v", got, tt.want)
			}
			if !slices.Equal(start, tt.start) {
				t.Errorf("the caller's slice was modified: %v", start)
			}
			if got, want := HasFinalizer(obj, testFinalizer), slices.Contains(tt.want, testFinalizer); got != want {
				t.Errorf("HasFinalizer = %v, want %v", got, want)
			}
		})
	}
}

func add(o metav1.Object) bool    { return AddFinalizer(o, testFinalizer) }
func remove(o metav1.Object) bool { return RemoveFinalizer(o, testFinalizer) }
