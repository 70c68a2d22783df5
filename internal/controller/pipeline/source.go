package pipeline

import (
	"context"
	"fmt"
	"time"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/source"
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
	refs, err := r.Poller.Refs(ctx, s.pipeline.Spec.Git.RepoURL, auth, maxAge)
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
	return change.PipelineGitAuth(ctx, r.APIReader, p)
}

// pipelineField names the Pipeline field behind a field internal/source
// blames: the one place source errors get the Pipeline's names.
func pipelineField(f source.Field) string {
	switch f {
	case source.FieldBranch:
		return "spec.git.branch"
	case source.FieldUsername:
		return "spec.git.secretRef[" + promotionv1alpha1.GitSecretKeyUsername + "]"
	case source.FieldSSHPrivateKey:
		return "spec.git.secretRef[" + promotionv1alpha1.GitSecretKeySSHPrivateKey + "]"
	case source.FieldSSHPassphrase:
		return "spec.git.secretRef[" + promotionv1alpha1.GitSecretKeyPassword + "]"
	case source.FieldKnownHosts:
		return "spec.git.secretRef[" + promotionv1alpha1.GitSecretKeyKnownHosts + "]"
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
