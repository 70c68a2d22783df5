package pullrequest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/forge"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// Review stacks (spec.pullRequests.reviewStacks): each open pull request
// that may be previewed (not a fork, unless allowForks) gets a Stack of
// its own, made from the template at the pull request's head, controlled
// by the Pipeline and named change.ReviewStackName. The Stack controller
// deploys it as any Stack; this controller only makes it, moves it to
// each new head, posts what it shows (its outputs, its state, when its ttl
// runs out) in a comment of its own, edited as that changes, and deletes
// it when the pull request closes, its finalizer destroying its resources
// first (destroyOnFinalize is set).
//
// The Pipeline acts only on the Stack it recorded: status.pullRequests'
// reviewStack.uid, the UID the API server gave the Stack it made. An
// object under the name with another UID is someone else's and is left
// alone (the pull request says so), except one that is exactly what the
// Pipeline would make, controlled by it, which it takes as its own: the
// Stack a reconcile made and could not record before it stopped.
//
// At most maxStacks exist at once, the oldest pull requests first; the
// others wait, and their comments say so. A review stack deleted
// meanwhile (its ttl ran out, or a person deleted it) is not made again
// for the same head: a new push makes a new one.
//
// +kubebuilder:rbac:groups=pulumi.com,resources=stacks,verbs=get;list;watch;create;update;delete

// EventReviewStack: a review stack was made, moved to a new head or
// deleted.
const EventReviewStack = "ReviewStack"

// maxOutputs is how many outputs a review stack's comment lists, and
// maxOutput how long each value may be there.
const (
	maxOutputs = 30
	maxOutput  = 200
)

// reconcileReviewStacks makes, moves and observes the review stack of
// each open pull request, and posts each one's comment. Without
// spec.pullRequests.reviewStacks, it deletes those the Pipeline made.
func (s *session) reconcileReviewStacks(ctx context.Context) (sreconcile.Result, error) {
	spec := s.p.Spec.PullRequests.ReviewStacks
	st := s.p.Status.PullRequests
	if spec == nil {
		for i := range st.PullRequests {
			if err := s.dropReviewStack(ctx, &st.PullRequests[i]); err != nil {
				return sreconcile.ResultEmpty, err
			}
		}
		return sreconcile.ResultEmpty, nil
	}
	live, err := s.liveReviewStacks(ctx)
	if err != nil {
		return sreconcile.ResultEmpty, err
	}
	var posting []error
	for _, pr := range s.open {
		e := s.entry(pr.Number)
		if pr.Fork && !s.p.Spec.PullRequests.AllowForks {
			// Never a Stack with the template's credentials for a fork:
			// the previews' comment says why nothing runs.
			if err := s.dropReviewStack(ctx, e); err != nil {
				return sreconcile.ResultEmpty, err
			}
			continue
		}
		if e.ReviewStack == nil {
			e.ReviewStack = &promotionv1alpha1.ReviewStackStatus{Name: change.ReviewStackName(s.p.Name, pr.Number)}
		}
		rs := e.ReviewStack
		had := rs.UID != ""
		stack, err := s.reviewStack(ctx, pr, rs, live < int(max(spec.MaxStacks, 1)))
		if err != nil {
			return sreconcile.ResultEmpty, err
		}
		if has := rs.UID != ""; has != had {
			switch {
			case has:
				live++
			case stack == nil || stack.DeletionTimestamp.IsZero():
				// Gone; one still being destroyed counts until it is.
				live--
			}
		}
		if err := s.postReviewStack(ctx, pr.Number, rs, stack); err != nil {
			// The others are still made, moved and posted.
			msg := sreconcile.Truncate(fmt.Sprintf("posting the review stack to pull request #%d: %v", pr.Number, err), 1024)
			s.event(corev1.EventTypeWarning, EventForgeFailed, msg)
			posting = append(posting, errors.New(msg))
		}
	}
	if len(posting) > 0 {
		err := errors.Join(posting...)
		s.p.Status.PullRequests.Error = sreconcile.Truncate(err.Error(), 1024)
		return sreconcile.ResultEmpty, sreconcile.NewGeneric(reasonForge, err)
	}
	return sreconcile.ResultEmpty, nil
}

// liveReviewStacks counts the review stacks that exist: those recorded,
// and those of the Pipeline's still being destroyed (their pull request
// closed, or their ttl ran out), whose records are dropped already but
// whose resources are not gone yet.
func (s *session) liveReviewStacks(ctx context.Context) (int, error) {
	recorded := map[types.UID]bool{}
	for _, e := range s.p.Status.PullRequests.PullRequests {
		if e.ReviewStack != nil && e.ReviewStack.UID != "" {
			recorded[e.ReviewStack.UID] = true
		}
	}
	var stacks pulumiv1.StackList
	if err := s.r.Client.List(ctx, &stacks, client.InNamespace(s.p.Namespace),
		client.MatchingLabels{promotionv1alpha1.PipelineLabel: s.p.Name}); err != nil {
		return 0, sreconcile.NewGeneric(reasonPending, fmt.Errorf("listing the review stacks: %w", err))
	}
	live := len(recorded)
	for i := range stacks.Items {
		stack := &stacks.Items[i]
		if !stack.DeletionTimestamp.IsZero() && metav1.IsControlledBy(stack, s.p) && !recorded[stack.UID] {
			live++
		}
	}
	return live, nil
}

// reviewStack brings pull request pr's review stack, recorded in rs, to
// its head and returns the Stack as it is (nil when there is none).
// mayMake says a new one is within maxStacks.
func (s *session) reviewStack(ctx context.Context, pr forge.PullRequest, rs *promotionv1alpha1.ReviewStackStatus, mayMake bool) (*pulumiv1.Stack, error) {
	desired := s.reviewStackSpec(pr)
	stack, err := s.readStack(ctx, s.r.Client, rs.Name)
	if err == nil && rs.UID != "" && (stack == nil || stack.UID != rs.UID) {
		// The cache may not have the Stack made a moment ago yet: only
		// the API server says it is gone.
		stack, err = s.readStack(ctx, s.r.APIReader, rs.Name)
	}
	if err != nil {
		return nil, err
	}
	found := stack != nil
	if !found {
		stack = &pulumiv1.Stack{}
	}
	switch {
	case rs.UID != "" && (!found || stack.UID != rs.UID):
		s.reviewStackGone(rs, nil)
		return nil, nil
	case rs.UID != "":
		return stack, s.followReviewStack(ctx, pr, rs, stack, desired)
	case rs.Head == pr.Head:
		// Deleted (its ttl ran out, or a person deleted it) at this
		// head: a new push makes a new one.
		return nil, nil
	case found && metav1.IsControlledBy(stack, s.p) && !stack.DeletionTimestamp.IsZero():
		rs.Phase, rs.Message = promotionv1alpha1.ReviewStackWaiting,
			fmt.Sprintf("waiting for the previous review stack %s to be destroyed", rs.Name)
		return nil, nil
	case found && adoptable(stack, s.p, desired):
		// Made by a reconcile that stopped before it recorded it.
		rs.UID, rs.Head = stack.UID, pr.Head
		return stack, s.followReviewStack(ctx, pr, rs, stack, desired)
	case found:
		rs.Phase, rs.Message = promotionv1alpha1.ReviewStackFailed, fmt.Sprintf(
			"Stack %s exists and is not the review stack this Pipeline made for pull request #%d: it is left alone; delete it, and the next push makes the review stack",
			rs.Name, pr.Number)
		return nil, nil
	case !mayMake:
		rs.Phase, rs.Message = promotionv1alpha1.ReviewStackWaiting, fmt.Sprintf(
			"waiting: %d review stacks exist, the most spec.pullRequests.reviewStacks.maxStacks allows; one goes when its pull request closes",
			max(s.p.Spec.PullRequests.ReviewStacks.MaxStacks, 1))
		return nil, nil
	}
	stack = &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: rs.Name, Namespace: s.p.Namespace,
			Labels: map[string]string{promotionv1alpha1.PipelineLabel: s.p.Name, PullRequestLabel: numberLabel(pr.Number)}},
		Spec: desired,
	}
	if err := controllerutil.SetControllerReference(s.p, stack, s.r.Client.Scheme()); err != nil {
		return nil, err
	}
	// What is made here is recorded only by this reconcile's status
	// patch, which a copy of the Pipeline older than the one stored
	// would not write.
	if err := s.checkCurrent(ctx); err != nil {
		return nil, err
	}
	switch err := s.r.Client.Create(ctx, stack); {
	case apierrors.IsAlreadyExists(err):
		// The cache had not seen it: decided on the next look.
		return nil, sreconcile.NewWaiting(reasonPending, fmt.Errorf("review stack %s exists already; looking again", rs.Name), staleRecheck)
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
		rs.Phase, rs.Message = promotionv1alpha1.ReviewStackFailed, sreconcile.Truncate("the review stack could not be made: "+err.Error(), 1024)
		return nil, nil
	case err != nil:
		return nil, sreconcile.NewGeneric(reasonPending, fmt.Errorf("making review stack %s: %w", rs.Name, err))
	}
	rs.UID, rs.Head, rs.ExpiresAt = stack.UID, pr.Head, nil
	rs.Phase, rs.Message = promotionv1alpha1.ReviewStackDeploying, "deploying "+change.ShortCommit(pr.Head)
	s.event(corev1.EventTypeNormal, EventReviewStack, fmt.Sprintf("made review stack %s for pull request #%d at %s", rs.Name, pr.Number, change.ShortCommit(pr.Head)))
	return stack, nil
}

// followReviewStack moves the recorded review stack to the template at
// pr's head when it is not there, and otherwise reads where it is.
func (s *session) followReviewStack(ctx context.Context, pr forge.PullRequest, rs *promotionv1alpha1.ReviewStackStatus, stack *pulumiv1.Stack, desired shared.StackSpec) error {
	switch {
	case !metav1.IsControlledBy(stack, s.p):
		// Someone took it from the Pipeline: it is no longer moved, nor
		// deleted with the pull request.
		rs.Phase, rs.Message = promotionv1alpha1.ReviewStackFailed, fmt.Sprintf(
			"Stack %s is no longer controlled by this Pipeline: it is left alone", rs.Name)
		return nil
	case !stack.DeletionTimestamp.IsZero():
		s.reviewStackGone(rs, stack)
		return nil
	case change.AuthorizedStage(stack.Annotations) != "":
		// The admission policy refuses it; one made before that rule is
		// never moved to a pull request's head.
		rs.Phase, rs.Message = promotionv1alpha1.ReviewStackFailed, fmt.Sprintf(
			"Stack %s names stage %s: a review stack is never governed, so it is not moved to the pull request's head", rs.Name, change.AuthorizedStage(stack.Annotations))
		return nil
	case !equality.Semantic.DeepDerivative(desired, stack.Spec):
		if err := s.checkCurrent(ctx); err != nil {
			return err
		}
		moved := stack.DeepCopy()
		moved.Spec = desired
		switch err := s.r.Client.Update(ctx, moved); {
		case apierrors.IsConflict(err):
			return sreconcile.NewWaiting(reasonPending, fmt.Errorf("review stack %s changed meanwhile; looking again", rs.Name), staleRecheck)
		case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
			rs.Phase, rs.Message = promotionv1alpha1.ReviewStackFailed, sreconcile.Truncate("the review stack could not be moved to the pull request's head: "+err.Error(), 1024)
			return nil
		case err != nil:
			return sreconcile.NewGeneric(reasonPending, fmt.Errorf("moving review stack %s to %s: %w", rs.Name, change.ShortCommit(pr.Head), err))
		}
		if rs.Head != pr.Head {
			s.event(corev1.EventTypeNormal, EventReviewStack, fmt.Sprintf("moved review stack %s to %s (pull request #%d)", rs.Name, change.ShortCommit(pr.Head), pr.Number))
		}
		rs.Head = pr.Head
		rs.Phase, rs.Message = promotionv1alpha1.ReviewStackDeploying, "deploying "+change.ShortCommit(pr.Head)
		return nil
	}
	rs.Head, rs.ExpiresAt = pr.Head, stack.Status.ExpiresAt.DeepCopy()
	st := stack.Status
	switch stalled := apimeta.FindStatusCondition(st.Conditions, sreconcile.StalledCondition); {
	case sreconcile.IsReady(st.Conditions) && st.ObservedGeneration == stack.Generation &&
		st.LastUpdate != nil && st.LastUpdate.LastSuccessfulCommit == pr.Head:
		rs.Phase, rs.Message = promotionv1alpha1.ReviewStackReady, "deployed at "+change.ShortCommit(pr.Head)
	case stalled != nil && stalled.Status == metav1.ConditionTrue && stalled.ObservedGeneration == stack.Generation:
		rs.Phase, rs.Message = promotionv1alpha1.ReviewStackFailed, sreconcile.Truncate(
			fmt.Sprintf("%s could not be deployed (%s): %s", change.ShortCommit(pr.Head), stalled.Reason, stalled.Message), 1024)
	default:
		rs.Phase, rs.Message = promotionv1alpha1.ReviewStackDeploying, "deploying "+change.ShortCommit(pr.Head)
	}
	return nil
}

// reviewStackGone records that the recorded review stack is gone, or
// going (stack, being deleted): its ttl ran out, or a person deleted it.
// It is not made again for the head it was at.
func (s *session) reviewStackGone(rs *promotionv1alpha1.ReviewStackStatus, stack *pulumiv1.Stack) {
	// rs.Head stays the head the Stack was at: a push seen only now
	// makes a new one.
	rs.UID = ""
	if stack != nil && stack.DeletedExpired() {
		// Deleted once its ttl had run out, as the Stack controller
		// decides it: from the API server's two timestamps.
		rs.ExpiresAt = &metav1.Time{Time: stack.ExpiresAt()}
	}
	if rs.ExpiresAt != nil && !s.now.Before(rs.ExpiresAt.Time) {
		rs.Phase, rs.Message = promotionv1alpha1.ReviewStackExpired, fmt.Sprintf(
			"its ttl ran out at %s: its resources are destroyed; push to the pull request to deploy it again", rs.ExpiresAt.UTC().Format(time.RFC3339))
		return
	}
	rs.Phase, rs.Message = promotionv1alpha1.ReviewStackFailed,
		fmt.Sprintf("Stack %s was deleted; push to the pull request to deploy it again", rs.Name)
}

// reviewStackSpec is what pr's review stack is: the template, at the
// pull request's head of the Pipeline's repository, under a stack name of
// its own, destroyed and removed from its backend when deleted.
func (s *session) reviewStackSpec(pr forge.PullRequest) shared.StackSpec {
	spec := *s.p.Spec.PullRequests.ReviewStacks.Template.DeepCopy()
	if spec.GitSource == nil {
		spec.GitSource = &shared.GitSource{}
	}
	spec.ProjectRepo, spec.Commit, spec.Branch = s.p.Spec.Git.RepoURL, pr.Head, ""
	spec.ProgramRef, spec.FluxSource = nil, nil
	spec.Stack += "-pr-" + strconv.FormatInt(pr.Number, 10)
	spec.DestroyOnFinalize, spec.RemoveOnFinalize = true, true
	return spec
}

// adoptable reports whether stack, found unrecorded under a review
// stack's name, is exactly what the Pipeline p would make (controlled by
// it, with the spec it would write, in no stage), so that taking it as
// the review stack hands nobody anything.
func adoptable(stack *pulumiv1.Stack, p *promotionv1alpha1.Pipeline, desired shared.StackSpec) bool {
	return metav1.IsControlledBy(stack, p) && stack.DeletionTimestamp.IsZero() &&
		change.AuthorizedStage(stack.Annotations) == "" &&
		equality.Semantic.DeepDerivative(desired, stack.Spec) && equality.Semantic.DeepDerivative(stack.Spec, desired)
}

// dropReviewStack deletes the review stack recorded for e, if any, and
// forgets it; its finalizer destroys its resources first.
func (s *session) dropReviewStack(ctx context.Context, e *promotionv1alpha1.PullRequestStatus) error {
	rs := e.ReviewStack
	if rs == nil {
		return nil
	}
	if err := s.checkCurrent(ctx); err != nil {
		return err
	}
	if rs.UID != "" {
		// Read live: only the Stack the Pipeline made, still controlled
		// by it and in no stage, is deleted (its deletion destroys what
		// it deployed), and only as it was read.
		stack, err := s.readStack(ctx, s.r.APIReader, rs.Name)
		if err != nil {
			return err
		}
		if stack != nil && stack.UID == rs.UID && stack.DeletionTimestamp.IsZero() &&
			metav1.IsControlledBy(stack, s.p) && change.AuthorizedStage(stack.Annotations) == "" {
			uid, version := stack.UID, stack.ResourceVersion
			switch err := s.r.Client.Delete(ctx, stack, client.Preconditions{UID: &uid, ResourceVersion: &version}); {
			case err == nil:
				s.event(corev1.EventTypeNormal, EventReviewStack, fmt.Sprintf("deleting review stack %s of pull request #%d, its resources destroyed first", rs.Name, e.Number))
			case apierrors.IsConflict(err):
				return sreconcile.NewWaiting(reasonPending, fmt.Errorf("review stack %s changed meanwhile; looking again", rs.Name), staleRecheck)
			case !apierrors.IsNotFound(err):
				return sreconcile.NewGeneric(reasonPending, fmt.Errorf("deleting review stack %s: %w", rs.Name, err))
			}
		}
	}
	e.ReviewStack = nil
	return nil
}

// readStack reads the Stack name through r: nil when there is none.
func (s *session) readStack(ctx context.Context, r client.Reader, name string) (*pulumiv1.Stack, error) {
	stack := &pulumiv1.Stack{}
	switch err := r.Get(ctx, client.ObjectKey{Namespace: s.p.Namespace, Name: name}, stack); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, sreconcile.NewGeneric(reasonPending, fmt.Errorf("reading review stack %s: %w", name, err))
	}
	return stack, nil
}

// dropClosedReviewStacks deletes the review stacks of the pull requests
// no longer open (heads holds the open ones).
func (s *session) dropClosedReviewStacks(ctx context.Context, heads map[int64]string) error {
	for i := range s.p.Status.PullRequests.PullRequests {
		e := &s.p.Status.PullRequests.PullRequests[i]
		if _, open := heads[e.Number]; open {
			continue
		}
		rs := e.ReviewStack
		if err := s.dropReviewStack(ctx, e); err != nil {
			return err
		}
		if rs != nil && rs.CommentID != "" && s.forge != nil {
			// The comment says it is gone, so that nobody looks for it;
			// a closed pull request may refuse the edit, which changes
			// nothing else.
			body := fmt.Sprintf("%s\n### stackyard review stack `%s`\n\n**Destroyed**: the pull request closed; the Stack is deleted, its resources destroyed and its stack removed from the backend.\n",
				s.reviewMarker(), rs.Name)
			if err := s.forge.EditComment(ctx, e.Number, rs.CommentID, body); err != nil {
				s.event(corev1.EventTypeWarning, EventForgeFailed, sreconcile.Truncate(
					fmt.Sprintf("saying on pull request #%d that its review stack is destroyed: %v", e.Number, err), 1024))
			}
		}
	}
	return nil
}

// reviewMarker is the hidden line that makes a comment the Pipeline's
// review-stack comment.
func (s *session) reviewMarker() string {
	return fmt.Sprintf("<!-- stackyard:review-stack %s/%s -->", s.p.Namespace, s.p.Name)
}

// postReviewStack writes the review stack's comment on pull request
// number when what it shows changed: created (or found by its marker)
// the first time, edited after.
func (s *session) postReviewStack(ctx context.Context, number int64, rs *promotionv1alpha1.ReviewStackStatus, stack *pulumiv1.Stack) error {
	body := s.reviewComment(rs, stack)
	sum := sha256.Sum256([]byte(body))
	digest := hex.EncodeToString(sum[:])[:16]
	if rs.Posted == digest {
		return nil
	}
	if err := s.writeComment(ctx, number, &rs.CommentID, s.reviewMarker(), body); err != nil {
		return err
	}
	rs.Posted = digest
	return nil
}

// reviewComment renders the review stack's comment in Markdown: its
// state, when its ttl runs out, and, once deployed, its outputs (those
// Pulumi marks secret are "[secret]" in the Stack's status already).
func (s *session) reviewComment(rs *promotionv1alpha1.ReviewStackStatus, stack *pulumiv1.Stack) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n### stackyard review stack `%s`\n\n", s.reviewMarker(), rs.Name)
	if s.r.DashboardURL != "" && rs.UID != "" {
		fmt.Fprintf(&b, "[Stack %s on the dashboard](%s/stacks/%s/%s)\n\n", rs.Name, strings.TrimRight(s.r.DashboardURL, "/"), s.p.Namespace, rs.Name)
	}
	fmt.Fprintf(&b, "**%s**: %s\n", rs.Phase, cell(rs.Message))
	if rs.ExpiresAt != nil && rs.UID != "" {
		fmt.Fprintf(&b, "\nIts ttl runs out at %s: it is destroyed then.\n", rs.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if stack == nil || rs.Phase != promotionv1alpha1.ReviewStackReady || len(stack.Status.Outputs) == 0 {
		return b.String()
	}
	names := make([]string, 0, len(stack.Status.Outputs))
	for name := range stack.Status.Outputs {
		names = append(names, name)
	}
	slices.Sort(names)
	b.WriteString("\n| Output | Value |\n|---|---|\n")
	for i, name := range names {
		if i == maxOutputs {
			fmt.Fprintf(&b, "\n%d more outputs: see Stack %s's status.\n", len(names)-maxOutputs, rs.Name)
			break
		}
		value := string(stack.Status.Outputs[name].Raw)
		if len(value) > maxOutput {
			value = value[:maxOutput] + "…"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` |\n", cell(name), cell(value))
	}
	return b.String()
}
