package pipeline

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/source"
)

// Keys of the Secret spec.git.secretRef names.
const (
	// SecretKeyUsername is the HTTP basic user name (with SecretKeyPassword,
	// or with SecretKeyAccessToken for hosts that want a particular one).
	SecretKeyUsername = "username"
	// SecretKeyPassword is the HTTP basic password, or, with
	// SecretKeySSHPrivateKey, the key's passphrase.
	SecretKeyPassword = "password"
	// SecretKeyAccessToken is an access token, sent as the HTTP basic
	// password.
	SecretKeyAccessToken = "accessToken"
	// SecretKeySSHPrivateKey is an SSH private key, for ssh:// and
	// user@host:path URLs.
	SecretKeySSHPrivateKey = "sshPrivateKey"
	// SecretKeyKnownHosts is known_hosts content that the SSH server's
	// host key is checked against.
	SecretKeyKnownHosts = "knownHosts"
)

// reconcileSource reads the credentials and lists the repository's refs
// through the shared poller: one query per repository, credentials and
// interval, whatever the number of Pipelines on it.
func (r *Reconciler) reconcileSource(ctx context.Context, s *session) (sreconcile.Result, error) {
	auth, err := r.gitAuth(ctx, s.pipeline)
	if err != nil {
		return sreconcile.ResultEmpty, err
	}
	s.auth = auth
	maxAge := pollMaxAge(s.interval)
	if r.freshPollWanted(s.pipeline) {
		maxAge = 0
	}
	refs, err := r.poller.Refs(ctx, s.pipeline.Spec.Git.RepoURL, auth, maxAge)
	if err != nil {
		return sreconcile.ResultEmpty, sourceError(err, s.interval)
	}
	s.refs = refs
	return sreconcile.ResultEmpty, nil
}

// pollMaxAge is how old a listing a Pipeline polling every interval
// accepts from the shared poller: one another Pipeline's poll got within
// the shortest jittered interval less a second, never its own previous
// one. Its polls come back after the interval moved by up to
// DefaultJitterFraction either way; accepting a whole interval would,
// after every shortened one, answer the poll with its own last listing and
// leave new refs unseen for about two intervals.
func pollMaxAge(interval time.Duration) time.Duration {
	shortest := time.Duration(float64(interval) * (1 - sreconcile.DefaultJitterFraction))
	return max(shortest-time.Second, 0)
}

// gitAuth reads the credentials from the Secret spec.git.secretRef names,
// nil without one. A Secret that does not exist (yet) is waited for, and
// stalls once it has been missing longer than the stall bound; its values
// never reach a message.
func (r *Reconciler) gitAuth(ctx context.Context, p *promotionv1alpha1.Pipeline) (*source.GitAuth, error) {
	return GitAuth(ctx, r.secrets, p)
}

// GitAuth reads the credentials of Pipeline p from the Secret
// spec.git.secretRef names, with secrets, nil without one: the pipeline's
// own, and the promotion's when it reads the code between two releases.
// Errors name the field; the Secret's values never reach a message.
func GitAuth(ctx context.Context, secrets client.Reader, p *promotionv1alpha1.Pipeline) (*source.GitAuth, error) {
	ref := p.Spec.Git.SecretRef
	if ref == nil || ref.Name == "" {
		return nil, nil
	}
	var secret corev1.Secret
	if err := secrets.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: ref.Name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, sreconcile.NewMissing(ReferenceNotFoundReason,
				fmt.Errorf("spec.git.secretRef: Secret %q not found", ref.Name))
		}
		return nil, sreconcile.NewGeneric(SecretReadFailedReason,
			fmt.Errorf("spec.git.secretRef: reading Secret %q: %w", ref.Name, err))
	}
	return authFromSecret(ref.Name, secret.Data)
}

// authFromSecret picks the credentials out of a Secret's data: an SSH key
// first (password is then its passphrase), then an access token, then a
// user name and password.
func authFromSecret(name string, data map[string][]byte) (*source.GitAuth, error) {
	value := func(key string) string { return string(data[key]) }
	has := func(key string) bool { return len(data[key]) > 0 }
	switch {
	case has(SecretKeySSHPrivateKey):
		return &source.GitAuth{
			SSHPrivateKey: value(SecretKeySSHPrivateKey),
			SSHPassphrase: value(SecretKeyPassword),
			KnownHosts:    value(SecretKeyKnownHosts),
		}, nil
	case has(SecretKeyAccessToken):
		return &source.GitAuth{Token: value(SecretKeyAccessToken), Username: value(SecretKeyUsername)}, nil
	case has(SecretKeyPassword):
		return &source.GitAuth{Username: value(SecretKeyUsername), Password: value(SecretKeyPassword)}, nil
	}
	return nil, sreconcile.NewMissing(ReferenceNotFoundReason,
		fmt.Errorf("spec.git.secretRef: Secret %q has none of the keys %s, %s, or %s and %s",
			name, SecretKeySSHPrivateKey, SecretKeyAccessToken, SecretKeyUsername, SecretKeyPassword))
}

// pipelineField names the Pipeline field behind a field internal/source
// blames: the one place source errors get the Pipeline's names.
func pipelineField(f source.Field) string {
	switch f {
	case source.FieldBranch:
		return "spec.git.branch"
	case source.FieldUsername:
		return "spec.git.secretRef[" + SecretKeyUsername + "]"
	case source.FieldSSHPrivateKey:
		return "spec.git.secretRef[" + SecretKeySSHPrivateKey + "]"
	case source.FieldSSHPassphrase:
		return "spec.git.secretRef[" + SecretKeyPassword + "]"
	case source.FieldKnownHosts:
		return "spec.git.secretRef[" + SecretKeyKnownHosts + "]"
	case source.FieldAuth, source.FieldGitHubApp, source.FieldGitHubAppInstallationID,
		source.FieldGitHubAppPrivateKey, source.FieldGitHubAPIURL:
		return "spec.git.secretRef"
	default:
		return "spec.git.repoURL"
	}
}

// sourceError names the Pipeline field a source error blames and types it
// by what happens next. A bad URL, refused credentials, or a repository or
// branch that does not exist need a person, who usually fixes them outside
// the Pipeline (a Secret, the git host): the stall is looked at again
// every interval, and lifts once the cause is gone. Anything else (the host
// is down) is retried with backoff.
func sourceError(err error, interval time.Duration) error {
	located := source.Locate(err, pipelineField)
	if located == err {
		located = fmt.Errorf("%s: %w", pipelineField(source.FieldURL), err)
	}
	if source.IsPermanent(err) || source.ReasonOf(err) == source.ReasonNotFound {
		return sreconcile.NewStallingRequeue(SourceUnavailableReason, located, interval)
	}
	return sreconcile.NewGeneric(SourceUnavailableReason, located)
}
