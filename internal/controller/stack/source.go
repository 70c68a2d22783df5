package stack

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
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

// Keys of the deprecated gitAuthSecret Secret, as upstream reads them.
const (
	gitAuthSecretAccessToken   = "accessToken"
	gitAuthSecretSSHPrivateKey = "sshPrivateKey"
	gitAuthSecretPassword      = "password"
	gitAuthSecretUsername      = "username"
)

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
func (r *Reconciler) resolveSource(ctx context.Context, stack *pulumiv1.Stack) (Source, error) {
	spec := &stack.Spec
	switch {
	case spec.FluxSource != nil:
		art, err := flux.Resolve(ctx, r.Client, stack.Namespace, spec.FluxSource)
		if err != nil {
			return Source{}, err
		}
		return Source{
			Flux:     &autov1alpha1.FluxSource{URL: art.URL, Digest: art.Digest, Dir: spec.FluxSource.Dir},
			Revision: art.Revision,
			Watched:  true,
		}, nil
	case spec.ProgramRef != nil:
		return r.resolveProgram(ctx, stack)
	case spec.GitSource != nil && spec.ProjectRepo != "":
		return r.resolveGit(ctx, stack)
	default:
		return Source{}, sreconcile.NewStalling(pulumiv1.StalledSpecInvalidReason,
			errors.New("the stack has no source: set one of spec.projectRepo, spec.fluxSource or spec.programRef"))
	}
}

// resolveProgram returns the artifact the Program controller serves for the
// referenced Program.
func (r *Reconciler) resolveProgram(ctx context.Context, stack *pulumiv1.Stack) (Source, error) {
	var prog pulumiv1.Program
	key := client.ObjectKey{Namespace: stack.Namespace, Name: stack.Spec.ProgramRef.Name}
	if err := r.Client.Get(ctx, key, &prog); err != nil {
		if apierrors.IsNotFound(err) {
			return Source{}, sreconcile.NewMissing(pulumiv1.StalledSourceUnavailableReason,
				fmt.Errorf("spec.programRef: Program %q not found", key.Name))
		}
		return Source{}, failed(pulumiv1.StalledSourceUnavailableReason, fmt.Sprintf("spec.programRef: reading Program %q", key.Name), err)
	}
	art := prog.Status.Artifact
	if art == nil || art.URL == "" || prog.Status.ObservedGeneration != prog.Generation {
		return Source{}, sreconcile.NewWaiting(pulumiv1.StalledSourceUnavailableReason,
			fmt.Errorf("spec.programRef: Program %q has no artifact for generation %d yet", key.Name, prog.Generation), waitInterval)
	}
	return Source{Flux: &autov1alpha1.FluxSource{URL: art.URL, Digest: art.Digest}, Revision: art.Revision, Watched: true}, nil
}

// resolveGit pins the Workspace to an exact commit: the spec's commit, or
// the branch's current commit as polled.
func (r *Reconciler) resolveGit(ctx context.Context, stack *pulumiv1.Stack) (Source, error) {
	spec := stack.Spec.GitSource
	wsAuth, pollAuth, err := r.gitAuth(ctx, stack)
	if err != nil {
		return Source{}, err
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
			return Source{}, sourceError(&stack.Spec, err, interval)
		}
		if fresh {
			r.freshPolls.Store(stack.UID, req)
		}
	}
	src := gitSourceAt(spec, commit, wsAuth)
	src.Watched = watched
	return src, nil
}

// gitSourceAt is the Source of the git source spec at commit, fetched with
// the credentials auth.
func gitSourceAt(spec *shared.GitSource, commit string, auth *autov1alpha1.GitAuth) Source {
	return Source{
		Git: &autov1alpha1.GitSource{
			URL:     spec.ProjectRepo,
			Ref:     commit,
			Dir:     spec.RepoDir,
			Shallow: spec.Shallow,
			Auth:    auth,
		},
		Revision: commit,
	}
}

// SourceAt returns the Source of a git-sourced Stack (spec.projectRepo)
// pinned to commit, whatever commit or branch the Stack itself names, with
// the Stack's git credentials as Secret references, and without polling.
// With BuildWorkspace it makes a Workspace that runs the Stack's program at
// a commit the Stack does not run yet: the Promotion controller previews a
// release this way. c reads the credentials' Secrets (never cached); errors
// are typed and name the Stack's fields, as the Stack's own reconcile does.
func SourceAt(ctx context.Context, c client.Client, stack *pulumiv1.Stack, commit string) (Source, error) {
	spec := stack.Spec.GitSource
	if spec == nil || spec.ProjectRepo == "" {
		return Source{}, sreconcile.NewStalling(pulumiv1.StalledSpecInvalidReason,
			errors.New("the stack has no git source: set spec.projectRepo"))
	}
	auth, _, err := (&Reconciler{Client: c}).gitAuth(ctx, stack)
	if err != nil {
		return Source{}, err
	}
	return gitSourceAt(spec, commit, auth), nil
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

// gitAuth turns the Stack's gitAuth (or deprecated gitAuthSecret) into the
// Workspace's Secret references and, for polling from the operator, the
// credentials themselves. Only Secret-type references can be passed on to a
// Workspace without copying their values, so other types stall.
func (r *Reconciler) gitAuth(ctx context.Context, stack *pulumiv1.Stack) (*autov1alpha1.GitAuth, *source.GitAuth, error) {
	spec := stack.Spec.GitSource
	if spec.GitAuth == nil && spec.GitAuthSecret == "" {
		return nil, nil, nil
	}
	refs := map[string]*shared.ResourceRef{}
	if a := spec.GitAuth; a != nil {
		switch {
		case a.SSHAuth != nil:
			refs["sshAuth.sshPrivateKey"] = &a.SSHAuth.SSHPrivateKey
			refs["sshAuth.password"] = a.SSHAuth.Password
		case a.PersonalAccessToken != nil:
			refs["accessToken"] = a.PersonalAccessToken
		case a.BasicAuth != nil:
			refs["basicAuth.userName"] = &a.BasicAuth.UserName
			refs["basicAuth.password"] = &a.BasicAuth.Password
		case a.GitHubApp != nil:
			refs["githubApp.appID"] = &a.GitHubApp.AppID
			refs["githubApp.installationID"] = &a.GitHubApp.InstallationID
			refs["githubApp.privateKey"] = &a.GitHubApp.PrivateKey
		}
	} else if err := r.legacyGitAuthRefs(ctx, stack, refs); err != nil {
		return nil, nil, err
	}

	ws := &autov1alpha1.GitAuth{}
	poll := &source.GitAuth{}
	for name, ref := range refs {
		if ref == nil {
			continue
		}
		field := "spec.gitAuth." + name
		if ref.SelectorType != shared.ResourceSelectorSecret || ref.SecretRef == nil {
			return nil, nil, sreconcile.NewStalling(pulumiv1.StalledSpecInvalidReason,
				fmt.Errorf("%s: type %s is not supported; git credentials must be of type Secret", field, ref.SelectorType))
		}
		if ns := ref.SecretRef.Namespace; ns != "" && ns != stack.Namespace {
			return nil, nil, sreconcile.NewStalling(pulumiv1.StalledSpecInvalidReason,
				fmt.Errorf("%s.secret.namespace: %q is not the Stack's namespace", field, ns))
		}
		value, err := r.secretValue(ctx, stack.Namespace, field, ref.SecretRef.Name, ref.SecretRef.Key)
		if err != nil {
			return nil, nil, err
		}
		sel := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: ref.SecretRef.Name}, Key: ref.SecretRef.Key}
		if err := setGitAuth(name, field, sel, value, ws, poll); err != nil {
			return nil, nil, err
		}
	}
	return ws, poll, nil
}

// setGitAuth places one credential in both shapes.
func setGitAuth(name, field string, sel *corev1.SecretKeySelector, value string, ws *autov1alpha1.GitAuth, poll *source.GitAuth) error {
	switch name {
	case "sshAuth.sshPrivateKey":
		ws.SSHPrivateKey, poll.SSHPrivateKey = sel, value
	case "sshAuth.password":
		ws.Password, poll.SSHPassphrase = sel, value
	case "accessToken":
		ws.Token, poll.Token = sel, value
	case "basicAuth.userName":
		ws.Username, poll.Username = sel, value
	case "basicAuth.password":
		ws.Password, poll.Password = sel, value
	case "githubApp.appID", "githubApp.installationID", "githubApp.privateKey":
		if ws.GitHubApp == nil {
			ws.GitHubApp, poll.GitHubApp = &autov1alpha1.GitHubAppAuth{}, &source.GitHubApp{}
		}
		switch name {
		case "githubApp.appID":
			ws.GitHubApp.AppID, poll.GitHubApp.AppID = *sel, strings.TrimSpace(value)
		case "githubApp.installationID":
			id, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
			if err != nil {
				return sreconcile.NewStalling(pulumiv1.StalledSpecInvalidReason, fmt.Errorf("%s: not a number", field))
			}
			ws.GitHubApp.InstallationID, poll.GitHubApp.InstallationID = *sel, id
		case "githubApp.privateKey":
			ws.GitHubApp.PrivateKey, poll.GitHubApp.PrivateKey = *sel, value
		}
	}
	return nil
}

// legacyGitAuthRefs reads the deprecated gitAuthSecret: one Secret whose
// keys say which kind of authentication it holds (SSH key first, then a
// token, then basic auth, as upstream).
func (r *Reconciler) legacyGitAuthRefs(ctx context.Context, stack *pulumiv1.Stack, refs map[string]*shared.ResourceRef) error {
	name := stack.Spec.GitAuthSecret
	var secret corev1.Secret
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return sreconcile.NewMissing(pulumiv1.StalledSourceUnavailableReason,
				fmt.Errorf("spec.gitAuthSecret: Secret %q not found", name))
		}
		return failed(pulumiv1.SecretReadFailedReason, fmt.Sprintf("spec.gitAuthSecret: reading Secret %q", name), err)
	}
	ref := func(key string) *shared.ResourceRef {
		if _, ok := secret.Data[key]; !ok {
			return nil
		}
		r := shared.NewSecretResourceRef(name, key)
		return &r
	}
	switch {
	case ref(gitAuthSecretSSHPrivateKey) != nil:
		refs["sshAuth.sshPrivateKey"] = ref(gitAuthSecretSSHPrivateKey)
		refs["sshAuth.password"] = ref(gitAuthSecretPassword)
	case ref(gitAuthSecretAccessToken) != nil:
		refs["accessToken"] = ref(gitAuthSecretAccessToken)
	case ref(gitAuthSecretUsername) != nil && ref(gitAuthSecretPassword) != nil:
		refs["basicAuth.userName"] = ref(gitAuthSecretUsername)
		refs["basicAuth.password"] = ref(gitAuthSecretPassword)
	default:
		return sreconcile.NewStalling(pulumiv1.StalledSpecInvalidReason,
			fmt.Errorf("spec.gitAuthSecret: Secret %q has none of the keys %s, %s, or %s and %s",
				name, gitAuthSecretSSHPrivateKey, gitAuthSecretAccessToken, gitAuthSecretUsername, gitAuthSecretPassword))
	}
	return nil
}

// secretValue reads one key of a Secret in the Stack's namespace. A missing
// Secret or key is waited for: it is usually created alongside the Stack.
func (r *Reconciler) secretValue(ctx context.Context, namespace, field, name, key string) (string, error) {
	var secret corev1.Secret
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return "", sreconcile.NewMissing(pulumiv1.StalledSourceUnavailableReason,
				fmt.Errorf("%s: Secret %q not found", field, name))
		}
		return "", failed(pulumiv1.SecretReadFailedReason, fmt.Sprintf("%s: reading Secret %q", field, name), err)
	}
	value, ok := secret.Data[key]
	if !ok {
		return "", sreconcile.NewMissing(pulumiv1.StalledSourceUnavailableReason,
			fmt.Errorf("%s: Secret %q has no key %q", field, name, key))
	}
	return string(value), nil
}
