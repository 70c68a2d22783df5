package pullrequest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/forge"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/stackrun"
)

// Labels on the Workspaces and Updates that preview a pull request, beside
// promotionv1alpha1.PipelineLabel. They carry no pulumi.com/stack-name
// label: they are not the Stack's, and tools listing a Stack's Updates by
// it must not count them.
const (
	// PullRequestLabel is the pull request's number.
	PullRequestLabel = "promotion.stackyard.dev/pull-request"
	// HeadLabel is the commit previewed.
	HeadLabel = "promotion.stackyard.dev/head"
	// StackLabel names the Stack previewed.
	StackLabel = "promotion.stackyard.dev/stack"
)

// TriggerPullRequest is the stackyard.dev/trigger annotation of the
// Updates that preview pull requests.
const TriggerPullRequest = "PullRequestPreview"

// maxAttempts is how many times one Stack's preview is started for one
// head when it ends Interrupted or UpdateConflict (the Stack's own update
// held the lock): neither says anything about the pull request.
const maxAttempts = 3

// maxFailure bounds a failure's message in status.
const maxFailure = 512

// reconcilePreviews runs the previews of each open pull request's head,
// the oldest maxPreviews first, and settles each pull request's phase once
// all its Stacks' previews ended. A fork's is skipped unless allowForks.
func (s *session) reconcilePreviews(ctx context.Context) (sreconcile.Result, error) {
	spec := s.p.Spec.PullRequests
	limit := int(spec.MaxPreviews)
	if limit <= 0 {
		limit = 3
	}
	running := 0
	for _, pr := range s.open {
		e := s.entry(pr.Number)
		if e.Head != pr.Head {
			*e = promotionv1alpha1.PullRequestStatus{Number: pr.Number, Head: pr.Head, Fork: pr.Fork, CommentID: e.CommentID,
				Posted: e.Posted, Phase: promotionv1alpha1.PullRequestWaiting, Message: "waiting for a preview slot"}
		}
		if pr.Fork && !spec.AllowForks {
			e.Phase, e.Stacks = promotionv1alpha1.PullRequestSkipped, nil
			e.Message = "not previewed: the pull request comes from a fork, and spec.pullRequests.allowForks is off " +
				"(a preview runs its program with the Stacks' credentials)"
			continue
		}
		if e.Phase == promotionv1alpha1.PullRequestPreviewed || e.Phase == promotionv1alpha1.PullRequestFailed {
			continue
		}
		if running == limit {
			e.Phase, e.Message = promotionv1alpha1.PullRequestWaiting, fmt.Sprintf("waiting: %d pull requests are previewed at once", limit)
			continue
		}
		running++
		if err := s.preview(ctx, e); err != nil {
			return sreconcile.ResultEmpty, err
		}
	}
	return sreconcile.ResultEmpty, nil
}

// preview runs the previews of e's head against the Stacks of the stages,
// and records how far they are.
func (s *session) preview(ctx context.Context, e *promotionv1alpha1.PullRequestStatus) error {
	if e.Phase != promotionv1alpha1.PullRequestPreviewing {
		// A head posted as skipped (allowForks was off) is posted again
		// once previewed.
		e.Phase, e.Message, e.Posted = promotionv1alpha1.PullRequestPreviewing, "previewing", ""
		s.setStatus(ctx, e.Head, forge.Status{State: "pending", Description: "previewing " + change.ShortCommit(e.Head)})
	}
	targets, err := s.targets(ctx)
	if err != nil {
		return err
	}
	done, failed := 0, 0
	var stacks []promotionv1alpha1.PullRequestStackPreview
	for _, t := range targets {
		sp := recorded(e.Stacks, t.stage, t.name)
		if sp.Failure == "" && sp.Summary == nil {
			if t.problem != "" {
				sp.Failure = t.problem
			} else if err := s.runPreview(ctx, e, t.stack, &sp); err != nil {
				// What this and the Stacks before it made is recorded
				// even so: a record lost here would make their previews
				// look like someone else's at the next reconcile.
				for _, done := range append(stacks, sp) {
					e.Stacks = mergeRecorded(e.Stacks, done)
				}
				return err
			}
		}
		switch {
		case sp.Failure != "":
			done++
			failed++
		case sp.Summary != nil:
			done++
		}
		stacks = append(stacks, sp)
	}
	e.Stacks = stacks
	if done < len(targets) {
		e.Message = fmt.Sprintf("previewing: %d of %d Stacks done", done, len(targets))
		return nil
	}
	e.Phase, e.Message = promotionv1alpha1.PullRequestPreviewed, describe(stacks)
	if failed > 0 {
		e.Phase = promotionv1alpha1.PullRequestFailed
	}
	// Their agents would idle around; the Updates stay, for the record,
	// until the pull request moves on or closes.
	return s.deleteWorkspaces(ctx, e.Number)
}

// target is a Stack a pull request is previewed against, or why it cannot
// be.
type target struct {
	stage, name string
	stack       *pulumiv1.Stack
	problem     string
}

// targets lists the Stacks of the stages spec.pullRequests names, in
// their order, each stage's as change.Members has them. A stage that is missing or of another pipeline, or a Stack
// that is missing or does not consent to its stage, is a target that
// cannot be previewed, with the reason.
func (s *session) targets(ctx context.Context) ([]target, error) {
	var out []target
	for _, name := range s.p.Spec.PullRequests.Stages {
		stage := &promotionv1alpha1.Stage{}
		if err := s.r.Client.Get(ctx, client.ObjectKey{Namespace: s.p.Namespace, Name: name}, stage); err != nil {
			if !apierrors.IsNotFound(err) {
				return nil, sreconcile.NewGeneric("", fmt.Errorf("reading stage %s: %w", name, err))
			}
			out = append(out, target{stage: name, problem: fmt.Sprintf("spec.pullRequests.stages: stage %s not found", name)})
			continue
		}
		if stage.Spec.Pipeline != s.p.Name {
			out = append(out, target{stage: name, problem: fmt.Sprintf("spec.pullRequests.stages: stage %s belongs to pipeline %s", name, stage.Spec.Pipeline)})
			continue
		}
		members, err := change.ListMembers(ctx, s.r.Client, stage)
		if err != nil {
			if _, selErr := change.StackSelector(stage); selErr != nil {
				out = append(out, target{stage: name, problem: fmt.Sprintf("stage %s: %v", name, selErr)})
				continue
			}
			return nil, sreconcile.NewGeneric("", err)
		}
		if n := len(members.Bindings); n > change.MaxPullRequestStacks {
			out = append(out, target{stage: name, problem: fmt.Sprintf("stage %s deploys %d Stacks, more than the %d previewed", name, n, change.MaxPullRequestStacks)})
			continue
		}
		for _, b := range members.Bindings {
			t := target{stage: name, name: b.Name}
			stack := &pulumiv1.Stack{}
			err := s.r.Client.Get(ctx, client.ObjectKey{Namespace: s.p.Namespace, Name: b.Name}, stack)
			switch {
			case apierrors.IsNotFound(err):
				t.problem = fmt.Sprintf("Stack %s of stage %s not found", b.Name, name)
			case err != nil:
				return nil, sreconcile.NewGeneric("", fmt.Errorf("reading Stack %s: %w", b.Name, err))
			case change.Unconsented(name, stage.Spec.PreviewOnly, b.Name, stack.Annotations) != "":
				t.problem = change.Unconsented(name, stage.Spec.PreviewOnly, b.Name, stack.Annotations)
			default:
				t.stack = stack
			}
			out = append(out, t)
		}
	}
	return out, nil
}

// recorded is the preview of stack in stage among stacks, or a new one.
func recorded(stacks []promotionv1alpha1.PullRequestStackPreview, stage, stack string) promotionv1alpha1.PullRequestStackPreview {
	for _, sp := range stacks {
		if sp.Stage == stage && sp.Stack == stack {
			return sp
		}
	}
	return promotionv1alpha1.PullRequestStackPreview{Stage: stage, Stack: stack}
}

// mergeRecorded replaces the entry of sp's stage and Stack in stacks, or
// adds it.
func mergeRecorded(stacks []promotionv1alpha1.PullRequestStackPreview, sp promotionv1alpha1.PullRequestStackPreview) []promotionv1alpha1.PullRequestStackPreview {
	for i := range stacks {
		if stacks[i].Stage == sp.Stage && stacks[i].Stack == sp.Stack {
			stacks[i] = sp
			return stacks
		}
	}
	return append(stacks, sp)
}

// runPreview makes sure the preview of e's head against stack runs
// (stackrun.Preview), and records its outcome in sp once it ended, with
// the UIDs of what it made, which the choke point reads. An interrupted or
// conflicting preview is started again, up to maxAttempts times.
func (s *session) runPreview(ctx context.Context, e *promotionv1alpha1.PullRequestStatus, stack *pulumiv1.Stack, sp *promotionv1alpha1.PullRequestStackPreview) error {
	// What a preview makes is recorded only by this reconcile's status
	// patch; a copy of the Pipeline older than the one stored would make
	// it and then, stale, write nothing. So the copy is checked once,
	// before anything is made.
	if err := s.checkCurrent(ctx); err != nil {
		return err
	}
	name := change.PullRequestPreviewName(s.p.Name, e.Number, stack.Name, e.Head)
	if sp.Update == "" {
		sp.Update, sp.Recorded = name, nil
	}
	preview := &stackrun.Preview{
		Client: s.r.Client, APIReader: s.r.APIReader, Maker: s.p, Kind: "Pipeline",
		Stack: stack, Commit: e.Head, Name: name, Update: sp.Update,
		Labels: map[string]string{promotionv1alpha1.PipelineLabel: s.p.Name, PullRequestLabel: numberLabel(e.Number),
			HeadLabel: e.Head, StackLabel: stack.Name},
		Trigger:     TriggerPullRequest,
		Message:     fmt.Sprintf("preview of pull request #%d (%s) for pipeline %s", e.Number, change.ShortCommit(e.Head), s.p.Name),
		MaxAttempts: maxAttempts,
	}
	if sp.Recorded != nil {
		preview.Recorded = *sp.Recorded
	}
	st, err := preview.Run(ctx)
	s.stale = s.stale || preview.MakerStale
	sp.Update, sp.Recorded = preview.Update, &st.Recorded
	switch {
	case err != nil:
		return err
	case st.Failure != "":
		sp.Failure = sreconcile.Truncate(st.Failure, maxFailure)
	case st.Succeeded():
		sp.Summary, _ = change.Summarize(st.Update, 0)
	}
	return nil
}

// checkCurrent returns nil once the Pipeline in hand is found to be the
// one stored (read live, once per reconcile); otherwise it marks the
// reconcile stale, so that it writes nothing, and returns the wait.
func (s *session) checkCurrent(ctx context.Context) error {
	if s.current {
		return nil
	}
	stale, err := stackrun.Stale(ctx, s.r.APIReader, s.p)
	if err != nil {
		return sreconcile.NewGeneric("", fmt.Errorf("reading pipeline %s: %w", s.p.Name, err))
	}
	if stale {
		s.stale = true
		return sreconcile.NewWaiting("", errors.New("the pipeline read from the cache is older than the one stored: looking again"), staleRecheck)
	}
	s.current = true
	return nil
}

// kindOf is obj's kind, from its Go type.
func kindOf(obj client.Object) string {
	k := fmt.Sprintf("%T", obj)
	return k[strings.LastIndex(k, ".")+1:]
}

// deletePreviews deletes the Pipeline's preview Workspaces and Updates
// that keep does not keep (by pull request number and head).
func (s *session) deletePreviews(ctx context.Context, keep func(number int64, head string) bool) error {
	return s.deleteOwned(ctx, client.MatchingLabels{promotionv1alpha1.PipelineLabel: s.p.Name}, true, keep)
}

// deleteWorkspaces deletes the preview Workspaces of pull request number.
func (s *session) deleteWorkspaces(ctx context.Context, number int64) error {
	return s.deleteOwned(ctx, client.MatchingLabels{promotionv1alpha1.PipelineLabel: s.p.Name, PullRequestLabel: numberLabel(number)}, false,
		func(int64, string) bool { return false })
}

// deleteOwned deletes the Workspaces (and, with updates, the Updates)
// matching sel that the Pipeline controls, unless keep keeps them.
func (s *session) deleteOwned(ctx context.Context, sel client.MatchingLabels, updates bool, keep func(int64, string) bool) error {
	lists := []client.ObjectList{&autov1alpha1.WorkspaceList{}}
	if updates {
		lists = append(lists, &autov1alpha1.UpdateList{})
	}
	for _, list := range lists {
		if err := s.r.Client.List(ctx, list, client.InNamespace(s.p.Namespace), sel, client.HasLabels{PullRequestLabel}); err != nil {
			return sreconcile.NewGeneric("", fmt.Errorf("listing the pull requests' previews: %w", err))
		}
		err := apimeta.EachListItem(list, func(o runtime.Object) error {
			obj := o.(client.Object)
			number, _ := strconv.ParseInt(obj.GetLabels()[PullRequestLabel], 10, 64)
			if !metav1.IsControlledBy(obj, s.p) || keep(number, obj.GetLabels()[HeadLabel]) || !obj.GetDeletionTimestamp().IsZero() {
				return nil
			}
			if err := s.r.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return sreconcile.NewGeneric("", fmt.Errorf("deleting the preview's %s %s: %w", kindOf(obj), obj.GetName(), err))
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// describe sums up the previews of a head: "web-staging: 1 to update;
// web-prod: failed".
func describe(stacks []promotionv1alpha1.PullRequestStackPreview) string {
	if len(stacks) == 0 {
		return "no Stacks to preview"
	}
	parts := make([]string, 0, len(stacks))
	for _, sp := range stacks {
		what := change.DescribeSummary(sp.Summary)
		if sp.Failure != "" {
			what = "failed"
		}
		name := sp.Stack
		if name == "" {
			name = "stage " + sp.Stage
		}
		parts = append(parts, name+": "+what)
	}
	return sreconcile.Truncate(strings.Join(parts, "; "), maxFailure)
}

// setStatus sets the commit status of the Pipeline's previews on sha; a
// failure is an event, not an error (the final status is retried).
func (s *session) setStatus(ctx context.Context, sha string, st forge.Status) {
	st.Context = StatusContext(s.p.Name)
	st.TargetURL = s.link()
	if err := s.forge.SetStatus(ctx, sha, st); err != nil {
		s.event(corev1.EventTypeWarning, EventForgeFailed, sreconcile.Truncate("setting the commit status of "+change.ShortCommit(sha)+": "+err.Error(), maxFailure))
	}
}

// StatusContext is the context (GitLab: name) of the commit status of the
// previews of the Pipeline pipeline.
func StatusContext(pipeline string) string { return "stackyard/preview/" + pipeline }

// link is the dashboard's page of the Pipeline's stages, when there is a
// dashboard.
func (s *session) link() string {
	if s.r.DashboardURL == "" {
		return ""
	}
	return strings.TrimRight(s.r.DashboardURL, "/") + "/?namespace=" + s.p.Namespace
}
