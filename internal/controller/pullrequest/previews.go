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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	stackctl "github.com/stackyard/stackyard/internal/controller/stack"
	"github.com/stackyard/stackyard/internal/forge"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/shard"
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
		s.setStatus(ctx, e.Head, forge.Status{State: "pending", Description: "previewing " + short(e.Head)})
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
// their order. A stage that is missing or of another pipeline, or a Stack
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
		for _, b := range stage.Spec.Stacks {
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

// runPreview makes sure the preview of e's head against stack runs, and
// records its outcome in sp once it ended.
func (s *session) runPreview(ctx context.Context, e *promotionv1alpha1.PullRequestStatus, stack *pulumiv1.Stack, sp *promotionv1alpha1.PullRequestStackPreview) error {
	name := change.PullRequestPreviewName(s.p.Name, e.Number, stack.Name, e.Head)
	if sp.Update == "" {
		sp.Update = name
	}
	var ws *autov1alpha1.Workspace
	upd := &autov1alpha1.Update{}
	found, err := s.get(ctx, sp.Update, upd)
	if err != nil {
		return err
	}
	if !found || !upd.Status.IsComplete() {
		// Once the Update has ended its Workspace is deleted: a reconcile
		// that reads an older status must not make it again.
		if ws, err = s.ensureWorkspace(ctx, e, stack, name); err != nil {
			return failed(sp, err)
		}
		if upd, err = s.ensureUpdate(ctx, e, stack, name, sp.Update); err != nil {
			return failed(sp, err)
		}
	}
	// One made by someone else before the Pipeline got to it would post
	// its outcome as the pull request's.
	switch {
	case ws != nil && !metav1.IsControlledBy(ws, s.p):
		sp.Failure = fmt.Sprintf("Workspace %s exists and does not belong to the Pipeline", ws.Name)
		return nil
	case upd != nil && !metav1.IsControlledBy(upd, s.p):
		sp.Failure = fmt.Sprintf("Update %s exists and does not belong to the Pipeline", upd.Name)
		return nil
	}
	if upd == nil || !upd.Status.IsComplete() {
		if c := ws.StalledNow(); c != nil {
			sp.Failure = sreconcile.Truncate(fmt.Sprintf("the preview cannot run: Workspace %s is stalled: %s", ws.Name, c.Message), maxFailure)
		}
		return nil
	}
	if f := apimeta.FindStatusCondition(upd.Status.Conditions, autov1alpha1.UpdateConditionTypeFailed); f != nil && f.Status == metav1.ConditionTrue {
		attempt := 1
		if n, err := strconv.Atoi(strings.TrimPrefix(sp.Update, name+"-")); err == nil {
			attempt = n
		}
		if (f.Reason == autov1alpha1.UpdateReasonInterrupted || f.Reason == autov1alpha1.UpdateReasonConflict) && attempt < maxAttempts {
			sp.Update = name + "-" + strconv.Itoa(attempt+1)
			return nil
		}
		sp.Failure = sreconcile.Truncate(fmt.Sprintf("the preview failed (Update %s): %s", upd.Name, upd.Status.Message), maxFailure)
		return nil
	}
	sp.Summary, _ = change.Summarize(upd, 0)
	return nil
}

// failed records a Stalling error (the Stack's spec cannot make a
// Workspace) as the preview's failure, and returns any other for a retry.
func failed(sp *promotionv1alpha1.PullRequestStackPreview, err error) error {
	var stalling *sreconcile.Stalling
	if errors.As(err, &stalling) {
		sp.Failure = sreconcile.Truncate(err.Error(), maxFailure)
		return nil
	}
	return err
}

// ensureWorkspace creates the Workspace that runs stack's program at e's
// head, built by the Stack controller's own builder from the Stack's spec,
// unless it exists; it returns it as the cache has it (nil until then).
func (s *session) ensureWorkspace(ctx context.Context, e *promotionv1alpha1.PullRequestStatus, stack *pulumiv1.Stack, name string) (*autov1alpha1.Workspace, error) {
	ws := &autov1alpha1.Workspace{}
	if found, err := s.get(ctx, name, ws); found || err != nil {
		return ws, err
	}
	src, err := stackctl.SourceAt(ctx, s.r.Client, stack, e.Head)
	if err != nil {
		return nil, fmt.Errorf("Stack %s: %w", stack.Name, err)
	}
	ws, err = stackctl.BuildWorkspace(stack, src)
	if err != nil {
		return nil, fmt.Errorf("Stack %s: %w", stack.Name, err)
	}
	ws.Name, ws.Labels = name, s.labels(e, stack.Name, ws.Labels)
	return nil, s.create(ctx, ws)
}

// ensureUpdate creates the preview Update updName in the Workspace wsName,
// built as the Stack controller builds the Stack's own, unless it exists;
// it returns it as the cache has it (nil until then).
func (s *session) ensureUpdate(ctx context.Context, e *promotionv1alpha1.PullRequestStatus, stack *pulumiv1.Stack, wsName, updName string) (*autov1alpha1.Update, error) {
	upd := &autov1alpha1.Update{}
	if found, err := s.get(ctx, updName, upd); found || err != nil {
		return upd, err
	}
	upd = stackctl.BuildUpdate(stack, e.Head, autov1alpha1.PreviewType, TriggerPullRequest)
	upd.Name, upd.Spec.WorkspaceName, upd.Labels = updName, wsName, s.labels(e, stack.Name, upd.Labels)
	// An Update runs only in its Workspace's shard, which is the Stack's
	// as it was when the Workspace was made: a retry follows the Workspace.
	ws := &autov1alpha1.Workspace{}
	if found, err := s.get(ctx, wsName, ws); err != nil {
		return nil, err
	} else if found {
		shard.Stamp(ws, upd)
	}
	upd.Spec.Message = ptr.To(fmt.Sprintf("preview of pull request #%d (%s) for pipeline %s", e.Number, short(e.Head), s.p.Name))
	// The value diff is saved beside the plan; the plan is never applied.
	upd.Spec.SavePlan = ptr.To(true)
	return nil, s.create(ctx, upd)
}

// get reads obj of the Pipeline's namespace named name from the cache;
// found is false when it does not exist (yet).
func (s *session) get(ctx context.Context, name string, obj client.Object) (bool, error) {
	err := s.r.Client.Get(ctx, client.ObjectKey{Namespace: s.p.Namespace, Name: name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, sreconcile.NewGeneric("", fmt.Errorf("reading %s %s: %w", kindOf(obj), name, err))
	}
	return true, nil
}

// labels are the preview's labels: the Stack's, without its
// pulumi.com/stack-name, and the pull request's.
func (s *session) labels(e *promotionv1alpha1.PullRequestStatus, stackName string, labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if k != stackctl.StackNameLabel {
			out[k] = v
		}
	}
	out[promotionv1alpha1.PipelineLabel], out[PullRequestLabel], out[HeadLabel], out[StackLabel] = s.p.Name, numberLabel(e.Number), e.Head, stackName
	return out
}

// create creates obj, controlled by the Pipeline; one that exists already
// is what an earlier reconcile made.
func (s *session) create(ctx context.Context, obj client.Object) error {
	if err := controllerutil.SetControllerReference(s.p, obj, s.r.Client.Scheme()); err != nil {
		return err
	}
	obj.SetResourceVersion("")
	if err := s.r.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		if apierrors.IsInvalid(err) {
			return sreconcile.NewStalling("", fmt.Errorf("the preview's %s %s was rejected: %w", kindOf(obj), obj.GetName(), err))
		}
		return sreconcile.NewGeneric("", fmt.Errorf("creating the preview's %s %s: %w", kindOf(obj), obj.GetName(), err))
	}
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

// short is the first seven characters of a commit SHA.
func short(sha string) string { return sha[:min(len(sha), 7)] }

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
		s.event(corev1.EventTypeWarning, EventForgeFailed, sreconcile.Truncate("setting the commit status of "+short(sha)+": "+err.Error(), maxFailure))
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
