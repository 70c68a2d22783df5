package pipelinectl

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// TestStageDepths orders the seed's graph (dev and dev2 feed qa, qa feeds
// prod) and survives a cycle and an unknown upstream.
func TestStageDepths(t *testing.T) {
	stage := func(name string, upstream ...string) promotionv1alpha1.Stage {
		return promotionv1alpha1.Stage{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       promotionv1alpha1.StageSpec{Sources: promotionv1alpha1.ReleaseSources{Direct: len(upstream) == 0, Stages: upstream}},
		}
	}
	got := stageDepths([]promotionv1alpha1.Stage{
		stage("prod", "qa"), stage("qa", "dev", "dev2"), stage("dev2"), stage("dev"),
		stage("a", "b"), stage("b", "a"), stage("orphan", "gone"),
	})
	want := map[string]int{"dev": 0, "dev2": 0, "qa": 1, "prod": 2, "orphan": 0}
	for name, d := range want {
		if got[name] != d {
			t.Errorf("depth of %s = %d, want %d (all: %v)", name, got[name], d, got)
		}
	}
	if _, ok := got["a"]; !ok {
		t.Errorf("a stage in a cycle has no depth: %v", got)
	}
}
