package promotion

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/source"
)

// What reading the code between two releases needs: the stage's Pipeline
// and the Secret with its git credentials.
//
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=pipelines,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// Bounds of what the record's preview.source keeps.
const (
	maxSourceText = 256
)

// compareSource reads the code the promotion brings to stack: the commits
// between the commit it runs (its last successful one, else its pin) and
// the release's, and the files changed under its repoDir, from the
// stage's Pipeline's repository with the Pipeline's credentials. It
// returns what the record's preview.source records and the unified diff,
// kept with the plan. A history that cannot be read is said in the
// record's message; it never fails the promotion, since it only informs
// the approvers.
func (s *session) compareSource(ctx context.Context, stack *pulumiv1.Stack) (*promotionv1alpha1.SourceChange, []byte) {
	to := s.release.Spec.Commit.SHA
	rec := &promotionv1alpha1.SourceChange{From: runningCommit(stack), To: to}
	gs := stack.Spec.GitSource
	switch {
	case rec.From == "":
		rec.Message = "the Stack has not deployed a commit yet"
		return rec, nil
	case rec.From == to:
		return rec, nil
	case gs == nil:
		rec.Message = "the Stack has no git source"
		return rec, nil
	}
	p, err := get(ctx, s.r.Client, s.p.Namespace, "Pipeline", s.stage.Spec.Pipeline, &promotionv1alpha1.Pipeline{})
	switch {
	case err != nil:
		rec.Message = sreconcile.Truncate(err.Error(), maxMessage)
		return rec, nil
	case p == nil:
		rec.Message = fmt.Sprintf("Pipeline %s not found", s.stage.Spec.Pipeline)
		return rec, nil
	}
	if gs.ProjectRepo != p.Spec.Git.RepoURL {
		rec.Message = fmt.Sprintf("the Stack's spec.projectRepo is not the repository of Pipeline %s, whose credentials the comparison uses", p.Name)
		return rec, nil
	}
	auth, err := change.PipelineGitAuth(ctx, s.r.Client, p)
	if err != nil {
		rec.Message = sreconcile.Truncate(err.Error(), maxMessage)
		return rec, nil
	}
	cmp, err := source.Compare(ctx, p.Spec.Git.RepoURL, auth, rec.From, to, gs.RepoDir)
	if err != nil {
		rec.Message = sreconcile.Truncate("reading the history: "+err.Error(), maxMessage)
		return rec, nil
	}
	rec.Reverse, rec.CommitCount, rec.PathCount = cmp.Reverse, int32(cmp.CommitCount), int32(cmp.PathCount) //nolint:gosec // commit and path counts fit
	for _, c := range cmp.Commits {
		t := metav1.NewTime(c.Time)
		rec.Commits = append(rec.Commits, promotionv1alpha1.CommitInfo{
			SHA: c.SHA, Subject: sreconcile.Truncate(c.Subject, maxSourceText), Author: sreconcile.Truncate(c.Author, maxSourceText), Time: &t,
		})
	}
	rec.Paths = cmp.Paths
	patch := cmp.Patch
	if cmp.PatchTruncated {
		patch += fmt.Sprintf("\n[the diff was cut at %d KiB]\n", source.MaxComparePatch>>10)
	}
	return rec, []byte(patch)
}

// runningCommit is the commit stack runs: its last successful one, else
// the one it is pinned to.
func runningCommit(stack *pulumiv1.Stack) string {
	if lu := stack.Status.LastUpdate; lu != nil && lu.LastSuccessfulCommit != "" {
		return lu.LastSuccessfulCommit
	}
	if gs := stack.Spec.GitSource; gs != nil {
		return gs.Commit
	}
	return ""
}
