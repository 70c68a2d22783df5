package stackrun

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/source"
)

// Keys of the deprecated gitAuthSecret Secret, as upstream reads them.
const (
	gitAuthSecretAccessToken   = "accessToken"
	gitAuthSecretSSHPrivateKey = "sshPrivateKey"
	gitAuthSecretPassword      = "password"
	gitAuthSecretUsername      = "username"
)

// GitSourceAt is the Source of the git source spec at commit, fetched with
// the credentials auth.
func GitSourceAt(spec *shared.GitSource, commit string, auth *autov1alpha1.GitAuth) Source {
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
func SourceAt(ctx context.Context, c client.Reader, stack *pulumiv1.Stack, commit string) (Source, error) {
	spec := stack.Spec.GitSource
	if spec == nil || spec.ProjectRepo == "" {
		return Source{}, sreconcile.NewStalling(pulumiv1.StalledSpecInvalidReason,
			errors.New("the stack has no git source: set spec.projectRepo"))
	}
	auth, _, err := GitAuth(ctx, c, stack)
	if err != nil {
		return Source{}, err
	}
	return GitSourceAt(spec, commit, auth), nil
}

// GitAuth turns the Stack's gitAuth (or deprecated gitAuthSecret) into the
// Workspace's Secret references and, for polling from the operator, the
// credentials themselves, read through secrets (never a cache). Only Secret-type references can be passed on to a
// Workspace without copying their values, so other types stall.
func GitAuth(ctx context.Context, secrets client.Reader, stack *pulumiv1.Stack) (*autov1alpha1.GitAuth, *source.GitAuth, error) {
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
	} else if err := legacyGitAuthRefs(ctx, secrets, stack, refs); err != nil {
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
		value, err := secretValue(ctx, secrets, stack.Namespace, field, ref.SecretRef.Name, ref.SecretRef.Key)
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
func legacyGitAuthRefs(ctx context.Context, secrets client.Reader, stack *pulumiv1.Stack, refs map[string]*shared.ResourceRef) error {
	name := stack.Spec.GitAuthSecret
	var secret corev1.Secret
	if err := secrets.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return sreconcile.NewMissing(pulumiv1.StalledSourceUnavailableReason,
				fmt.Errorf("spec.gitAuthSecret: Secret %q not found", name))
		}
		return sreconcile.NewGeneric(pulumiv1.SecretReadFailedReason, fmt.Errorf("spec.gitAuthSecret: reading Secret %q: %w", name, err))
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
func secretValue(ctx context.Context, secrets client.Reader, namespace, field, name, key string) (string, error) {
	var secret corev1.Secret
	if err := secrets.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return "", sreconcile.NewMissing(pulumiv1.StalledSourceUnavailableReason,
				fmt.Errorf("%s: Secret %q not found", field, name))
		}
		return "", sreconcile.NewGeneric(pulumiv1.SecretReadFailedReason, fmt.Errorf("%s: reading Secret %q: %w", field, name, err))
	}
	value, ok := secret.Data[key]
	if !ok {
		return "", sreconcile.NewMissing(pulumiv1.StalledSourceUnavailableReason,
			fmt.Errorf("%s: Secret %q has no key %q", field, name, key))
	}
	return string(value), nil
}
