package receiver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// What waking needs: to list Pipelines and Stacks, and to set their
// reconcile-request annotation.
//
// +kubebuilder:rbac:groups=promotion.stackyard.dev,resources=pipelines,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=pulumi.com,resources=stacks,verbs=get;list;watch;patch

// Woken names an object a push woke.
type Woken struct {
	// Kind is Pipeline or Stack.
	Kind string
	// Name is its name, in the Receiver's namespace.
	Name string
}

// Waker wakes the objects a push concerns, in one namespace.
type Waker struct {
	// Client lists and patches Pipelines and Stacks.
	Client client.Client
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Wake sets, on every Pipeline of namespace that follows push's repository
// (its branch, for NewestFromBranch; any tag, for the tag strategies) and
// every Stack of namespace that tracks push's repository and branch (not
// a pinned one), or, for a pull request event, on every Pipeline that
// previews the pull requests into its branch, the reconcile-request
// annotation to a new value, which
// makes each look at its source at once instead of at its next poll. The
// value names the Receiver. Objects of other namespaces are never read.
func (w *Waker) Wake(ctx context.Context, namespace, receiver string, push Push) ([]Woken, error) {
	repos := map[string]bool{}
	for _, u := range push.RepoURLs {
		repos[NormalizeRepo(u)] = true
	}
	branch, isBranch := strings.CutPrefix(push.Ref, "refs/heads/")
	_, isTag := strings.CutPrefix(push.Ref, "refs/tags/")
	request := fmt.Sprintf("%s%s/%d", notificationv1alpha1.WakeRequestPrefix, receiver, w.now().UnixNano())
	var woken []Woken

	var pipelines promotionv1alpha1.PipelineList
	if err := w.Client.List(ctx, &pipelines, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing Pipelines: %w", err)
	}
	for _, p := range pipelines.Items {
		g := p.Spec.Git
		if !repos[NormalizeRepo(g.RepoURL)] {
			continue
		}
		byBranch := g.CommitSelectionStrategy == "" || g.CommitSelectionStrategy == promotionv1alpha1.NewestFromBranch
		switch {
		case push.PullRequest:
			// Only a Pipeline that previews pull requests into that
			// branch has anything to do.
			if p.Spec.PullRequests == nil || g.Branch != branch {
				continue
			}
		case (byBranch && !(isBranch && g.Branch == branch)) || (!byBranch && !isTag):
			continue
		}
		if err := w.request(ctx, &promotionv1alpha1.Pipeline{}, namespace, p.Name, request); err != nil {
			return woken, err
		}
		woken = append(woken, Woken{Kind: "Pipeline", Name: p.Name})
	}

	if !isBranch || push.PullRequest {
		return woken, nil
	}
	var stacks pulumiv1.StackList
	if err := w.Client.List(ctx, &stacks, client.InNamespace(namespace)); err != nil {
		return woken, fmt.Errorf("listing Stacks: %w", err)
	}
	for _, s := range stacks.Items {
		gs := s.Spec.GitSource
		if gs == nil || gs.Commit != "" || gs.Branch != branch || !repos[NormalizeRepo(gs.ProjectRepo)] {
			continue
		}
		if err := w.request(ctx, &pulumiv1.Stack{}, namespace, s.Name, request); err != nil {
			return woken, err
		}
		woken = append(woken, Woken{Kind: "Stack", Name: s.Name})
	}
	return woken, nil
}

// request merge-patches the reconcile-request annotation of the object
// namespace/name to value.
func (w *Waker) request(ctx context.Context, obj client.Object, namespace, name, value string) error {
	obj.SetNamespace(namespace)
	obj.SetName(name)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, shared.ReconcileRequestAnnotation, value)
	if err := w.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch))); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("waking %s: %w", name, err)
	}
	return nil
}

func (w *Waker) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}
