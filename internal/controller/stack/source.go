package stack

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/controller/stack/flux"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/source"
	"github.com/stackyard/stackyard/internal/stackrun"
)

// GitPoller answers the commit a branch points to. One is shared by every
// Stack so that stacks tracking the same branch with the same credentials
// cause one remote query per interval (internal/source.Poller).
type GitPoller interface {
	Latest(ctx context.Context, repoURL, branch string, auth *source.GitAuth, maxAge time.Duration) (string, error)
	// Key names what Latest shares: callers with equal keys get the same
	// answers.
	Key(repoURL, branch string, auth *source.GitAuth) string
}

// waitInterval is how long a Stack waits for a source that is not ready yet
// (a Program without an artifact, a Flux source still fetching).
const waitInterval = 10 * time.Second

// reconcileSource resolves the program's current revision.
func (s *session) reconcileSource(ctx context.Context) (sreconcile.Result, error) {
	if !tracksBranch(s.stack) {
		s.r.branches.forget(client.ObjectKeyFromObject(s.stack))
	}
	src, err := s.r.resolveSource(ctx, s.stack)
	if err != nil {
		return sreconcile.ResultEmpty, err
	}
	s.src = src
	return sreconcile.ResultEmpty, nil
}

// tracksBranch reports whether the Stack follows a git branch (the branch
// watch polls it), rather than a pinned commit, a Flux source or a Program.
func tracksBranch(stack *pulumiv1.Stack) bool {
	spec := &stack.Spec
	return spec.FluxSource == nil && spec.ProgramRef == nil && spec.GitSource != nil && spec.ProjectRepo != "" && spec.Commit == ""
}

// resolveSource finds what the Stack's program is now: for a branch, the
// commit it points to (polled through the shared poller); for a commit pin,
// that commit; for a Flux source or a Program, their current artifact.
func (r *Reconciler) resolveSource(ctx context.Context, stack *pulumiv1.Stack) (stackrun.Source, error) {
	spec := &stack.Spec
	switch {
	case spec.FluxSource != nil:
		art, err := flux.Resolve(ctx, r.Client, stack.Namespace, spec.FluxSource)
		if err != nil {
			return stackrun.Source{}, err
		}
		return stackrun.Source{
			Flux:     &autov1alpha1.FluxSource{URL: art.URL, Digest: art.Digest, Dir: spec.FluxSource.Dir},
			Revision: art.Revision,
			Watched:  true,
		}, nil
	case spec.ProgramRef != nil:
		return r.resolveProgram(ctx, stack)
	case spec.GitSource != nil && spec.ProjectRepo != "":
		return r.resolveGit(ctx, stack)
	default:
		return stackrun.Source{}, sreconcile.NewStalling(pulumiv1.StalledSpecInvalidReason,
			errors.New("the stack has no source: set one of spec.projectRepo, spec.fluxSource or spec.programRef"))
	}
}

// resolveProgram returns the artifact the Program controller serves for the
// referenced Program.
func (r *Reconciler) resolveProgram(ctx context.Context, stack *pulumiv1.Stack) (stackrun.Source, error) {
	var prog pulumiv1.Program
	key := client.ObjectKey{Namespace: stack.Namespace, Name: stack.Spec.ProgramRef.Name}
	if err := r.Client.Get(ctx, key, &prog); err != nil {
		if apierrors.IsNotFound(err) {
			return stackrun.Source{}, sreconcile.NewMissing(pulumiv1.StalledSourceUnavailableReason,
				fmt.Errorf("spec.programRef: Program %q not found", key.Name))
		}
		return stackrun.Source{}, failed(pulumiv1.StalledSourceUnavailableReason, fmt.Sprintf("spec.programRef: reading Program %q", key.Name), err)
	}
	art := prog.Status.Artifact
	if art == nil || art.URL == "" || prog.Status.ObservedGeneration != prog.Generation {
		return stackrun.Source{}, sreconcile.NewWaiting(pulumiv1.StalledSourceUnavailableReason,
			fmt.Errorf("spec.programRef: Program %q has no artifact for generation %d yet", key.Name, prog.Generation), waitInterval)
	}
	return stackrun.Source{Flux: &autov1alpha1.FluxSource{URL: art.URL, Digest: art.Digest}, Revision: art.Revision, Watched: true}, nil
}

// resolveGit pins the Workspace to an exact commit: the spec's commit, or
// the branch's current commit as polled.
func (r *Reconciler) resolveGit(ctx context.Context, stack *pulumiv1.Stack) (stackrun.Source, error) {
	spec := stack.Spec.GitSource
	wsAuth, pollAuth, err := stackrun.GitAuth(ctx, r.Client, stack)
	if err != nil {
		return stackrun.Source{}, err
	}
	commit := spec.Commit
	watched := true
	if commit == "" {
		// A new reconcile request means "look now": the branch is queried
		// afresh, once, instead of answered from the shared poller's cache.
		interval := ResyncInterval(&stack.Spec, r.MinResync)
		maxAge := interval
		req := reconcileRequest(stack)
		fresh := false
		if last := stack.Status.LastUpdate; last == nil || last.ReconcileRequest != req {
			if done, ok := r.freshPolls.Load(stack.UID); !ok || done != req {
				maxAge, fresh = 0, true
			}
		}
		if stalledOnSource(stack) {
			// A stall on the source is retried every resync interval;
			// the poller's cached failure would answer half of those.
			maxAge = 0
		}
		commit, err = r.Poller.Latest(ctx, spec.ProjectRepo, spec.Branch, pollAuth, maxAge)
		// The branch watch polls it from now on, and wakes the Stack when
		// it moves or fails.
		watched = r.branches.track(client.ObjectKeyFromObject(stack), spec.ProjectRepo, spec.Branch, pollAuth, commit, interval)
		if err != nil {
			return stackrun.Source{}, sourceError(&stack.Spec, err, interval)
		}
		if fresh {
			r.freshPolls.Store(stack.UID, req)
		}
	}
	src := stackrun.GitSourceAt(spec, commit, wsAuth)
	src.Watched = watched
	return src, nil
}

// stalledOnSource reports whether the Stack is stalled because its source
// was unavailable for a reason a person must fix.
func stalledOnSource(stack *pulumiv1.Stack) bool {
	c := apimeta.FindStatusCondition(stack.Status.Conditions, sreconcile.StalledCondition)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == pulumiv1.StalledSourceUnavailableReason
}

// sourceError names the Stack field a fetch error blames and types the
// error by what happens next: a permanent one
// (bad URL, credentials refused, no such branch) needs a person, and is
// mostly fixed outside the Stack (its Secret, the git host), which wakes
// nothing, so the stall is looked at again every resync interval; anything
// else is retried with backoff.
func sourceError(spec *shared.StackSpec, err error, resync time.Duration) error {
	if located := source.Locate(err, func(f source.Field) string { return stackField(spec, f) }); located != err {
		err = located
	} else {
		err = fmt.Errorf("%s: %w", stackField(spec, source.FieldURL), err)
	}
	if source.IsPermanent(err) {
		return sreconcile.NewStallingRequeue(pulumiv1.StalledSourceUnavailableReason, err, resync)
	}
	return sreconcile.NewGeneric(pulumiv1.StalledSourceUnavailableReason, err)
}
