package pipelinectl

import (
	"cmp"
	"context"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// StageRow is one stage as `stackyard pipeline status` shows it.
type StageRow struct {
	// Pipeline is the stage's pipeline.
	Pipeline string `json:"pipeline"`
	// Stage is the stage's name.
	Stage string `json:"stage"`
	// Release is the release the stage runs, if any.
	Release string `json:"release,omitempty"`
	// Commit is the release's full commit SHA.
	Commit string `json:"commit,omitempty"`
	// Subject is the release's commit subject.
	Subject string `json:"subject,omitempty"`
	// Since is when the release got there.
	Since *metav1.Time `json:"since,omitempty"`
	// Rollback says that a rollback brought it.
	Rollback bool `json:"rollback,omitempty"`
	// Health sums the stage's Stacks up: Healthy, Progressing, Degraded or
	// Unknown.
	Health string `json:"health"`
	// Stacks is how many Stacks the stage deploys (named, or selected and
	// consenting).
	Stacks int32 `json:"stacks"`
	// Unconsented is how many Stacks the stage's selector matches that do
	// not consent to it, which it leaves alone.
	Unconsented int32 `json:"unconsented,omitempty"`
	// WaitingFor is what keeps the next release out, if anything.
	WaitingFor string `json:"waitingFor,omitempty"`
}

// PipelineStatus returns a row per stage of pipeline ("" for every
// pipeline of the namespace), ordered by pipeline, then upstream stages
// before the stages they feed, then name.
func (c *Client) PipelineStatus(ctx context.Context, pipeline string) ([]StageRow, error) {
	stages, err := c.stages(ctx, pipeline)
	if err != nil {
		return nil, err
	}
	depth := stageDepths(stages)
	slices.SortFunc(stages, func(a, b promotionv1alpha1.Stage) int {
		return cmp.Or(cmp.Compare(a.Spec.Pipeline, b.Spec.Pipeline),
			cmp.Compare(depth[a.Name], depth[b.Name]), cmp.Compare(a.Name, b.Name))
	})
	rows := make([]StageRow, 0, len(stages))
	for _, s := range stages {
		row := StageRow{Pipeline: s.Spec.Pipeline, Stage: s.Name, Health: string(promotionv1alpha1.Unknown), WaitingFor: s.Status.WaitingFor,
			Stacks: s.Status.StackCount, Unconsented: s.Status.UnconsentedStackCount}
		if h := s.Status.Health; h != nil {
			row.Health = string(h.Status)
		}
		if cur := s.Status.CurrentRelease; cur != nil {
			row.Release, row.Commit, row.Subject, row.Rollback = cur.Name, cur.SHA, cur.Subject, cur.Rollback
			since := cur.Since
			row.Since = &since
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// stageDepths returns, per stage name, the length of the longest chain of
// upstream stages that feeds it (0 for a stage fed by the pipeline only),
// so that a listing reads in promotion order. Cycles and unknown stages
// count as 0; the Stage controller reports those.
func stageDepths(stages []promotionv1alpha1.Stage) map[string]int {
	upstream := map[string][]string{}
	for _, s := range stages {
		upstream[s.Name] = s.Spec.Sources.Stages
	}
	depth := map[string]int{}
	var visit func(name string, seen map[string]bool) int
	visit = func(name string, seen map[string]bool) int {
		if d, ok := depth[name]; ok {
			return d
		}
		if seen[name] {
			return 0
		}
		seen[name] = true
		d := 0
		for _, up := range upstream[name] {
			if _, known := upstream[up]; known {
				d = max(d, visit(up, seen)+1)
			}
		}
		depth[name] = d
		return d
	}
	for _, s := range stages {
		visit(s.Name, map[string]bool{})
	}
	return depth
}
