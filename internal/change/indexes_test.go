package change

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// indexedStage is a Stage of pipeline web with upstream stages and
// stacks.
func indexedStage(name string, upstream []string, stacks ...string) promotionv1alpha1.Stage {
	st := promotionv1alpha1.Stage{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       promotionv1alpha1.StageSpec{Pipeline: "web", Sources: promotionv1alpha1.ReleaseSources{Stages: upstream}},
	}
	for _, s := range stacks {
		st.Spec.Stacks = append(st.Spec.Stacks, promotionv1alpha1.StackBinding{Name: s})
	}
	return st
}

// The indexes decide which Stages a Stack, a Pipeline or an upstream Stage
// wakes, and which Promotions a Stage lists: a value missing here is a
// Stage that never hears of its change.
func TestStageIndexes(t *testing.T) {
	st := indexedStage("prod", []string{"staging", "qa"}, "web-prod", "db-prod")
	selecting := indexedStage("edge", nil)
	selecting.Spec.StackSelector = &metav1.LabelSelector{}
	tests := []struct {
		index string
		st    promotionv1alpha1.Stage
		want  []string
	}{
		{StackIndex, st, []string{"web-prod", "db-prod"}},
		{StackIndex, indexedStage("empty", nil), []string{}},
		{UpstreamIndex, st, []string{"staging", "qa"}},
		{UpstreamIndex, indexedStage("first", nil), nil},
		{PipelineIndex, st, []string{"web"}},
		{SelectorIndex, st, nil},
		{SelectorIndex, selecting, []string{HasSelector}},
	}
	for _, tt := range tests {
		t.Run(tt.index+"/"+tt.st.Name, func(t *testing.T) {
			f, ok := stageIndexes[tt.index]
			if !ok {
				t.Fatalf("no index %q", tt.index)
			}
			if got := f(&tt.st); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if len(stageIndexes) != 4 {
		t.Errorf("%d stage indexes; this test checks 4", len(stageIndexes))
	}
}

func TestPromotionStage(t *testing.T) {
	p := &promotionv1alpha1.Promotion{Spec: promotionv1alpha1.PromotionSpec{Stage: "prod", Release: "web-abc"}}
	if got := promotionStage(p); !slices.Equal(got, []string{"prod"}) {
		t.Errorf("promotion: got %q", got)
	}
	if got := promotionStage(&corev1.ConfigMap{}); got != nil {
		t.Errorf("another kind: got %q", got)
	}
}
