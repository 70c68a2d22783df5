package stage

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

func stageOf(name string, created time.Duration, upstream []string, stacks ...string) promotionv1alpha1.Stage {
	st := promotionv1alpha1.Stage{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at(created)},
		Spec:       promotionv1alpha1.StageSpec{Pipeline: "web", Sources: promotionv1alpha1.ReleaseSources{Stages: upstream}},
	}
	for _, s := range stacks {
		st.Spec.Stacks = append(st.Spec.Stacks, promotionv1alpha1.StackBinding{Name: s})
	}
	return st
}

func TestFindCycle(t *testing.T) {
	graph := func(stages ...promotionv1alpha1.Stage) map[string]*promotionv1alpha1.Stage {
		m := map[string]*promotionv1alpha1.Stage{}
		for i := range stages {
			m[stages[i].Name] = &stages[i]
		}
		return m
	}
	tests := []struct {
		name  string
		start string
		graph map[string]*promotionv1alpha1.Stage
		want  string
	}{
		{name: "a chain", start: "prod", graph: graph(stageOf("dev", 0, nil), stageOf("qa", 0, []string{"dev"}), stageOf("prod", 0, []string{"qa"}))},
		{name: "fan-in", start: "qa", graph: graph(stageOf("dev", 0, nil), stageOf("dev2", 0, nil), stageOf("qa", 0, []string{"dev", "dev2"}))},
		{name: "two stages", start: "qa", graph: graph(stageOf("dev", 0, []string{"qa"}), stageOf("qa", 0, []string{"dev"})), want: "qa dev qa"},
		{name: "three stages", start: "prod", graph: graph(stageOf("dev", 0, []string{"prod"}), stageOf("qa", 0, []string{"dev"}), stageOf("prod", 0, []string{"qa"})),
			want: "prod qa dev prod"},
		{name: "a cycle upstream, not through this stage", start: "prod",
			graph: graph(stageOf("dev", 0, []string{"qa"}), stageOf("qa", 0, []string{"dev"}), stageOf("prod", 0, []string{"qa"}))},
		{name: "a missing upstream", start: "qa", graph: graph(stageOf("qa", 0, []string{"dev"}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.Join(FindCycle(tt.start, tt.graph), " "); got != tt.want {
				t.Errorf("FindCycle = %q, want %q", got, tt.want)
			}
		})
	}
}
