package change

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/source"
)

// PipelineGitAuth reads the credentials of Pipeline p from the Secret
// spec.git.secretRef names, with secrets, nil without one: the pipeline's
// own, and the promotion's when it reads the code between two releases.
// Errors name the field; the Secret's values never reach a message.
func PipelineGitAuth(ctx context.Context, secrets client.Reader, p *promotionv1alpha1.Pipeline) (*source.GitAuth, error) {
	ref := p.Spec.Git.SecretRef
	if ref == nil || ref.Name == "" {
		return nil, nil
	}
	var secret corev1.Secret
	if err := secrets.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: ref.Name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, sreconcile.NewMissing(promotionv1alpha1.PipelineReasonReferenceNotFound,
				fmt.Errorf("spec.git.secretRef: Secret %q not found", ref.Name))
		}
		return nil, sreconcile.NewGeneric(promotionv1alpha1.PipelineReasonSecretReadFailed,
			fmt.Errorf("spec.git.secretRef: reading Secret %q: %w", ref.Name, err))
	}
	return authFromSecret(ref.Name, secret.Data)
}

// authFromSecret picks the credentials out of a Secret's data: an SSH key
// first (password is then its passphrase; knownHosts is required), then
// an access token, then a user name and password.
func authFromSecret(name string, data map[string][]byte) (*source.GitAuth, error) {
	value := func(key string) string { return string(data[key]) }
	has := func(key string) bool { return len(data[key]) > 0 }
	switch {
	case has(promotionv1alpha1.GitSecretKeySSHPrivateKey) && !has(promotionv1alpha1.GitSecretKeyKnownHosts):
		// A Pipeline decides what becomes a release: a server it cannot
		// tell from an impostor could hand it a commit nobody made.
		return nil, sreconcile.NewMissing(promotionv1alpha1.PipelineReasonReferenceNotFound,
			fmt.Errorf("spec.git.secretRef: Secret %q has %s but no %s: a Pipeline verifies the SSH server's host key, "+
				"since what it reads becomes a release; add the server's known_hosts lines (ssh-keyscan HOST) under %s",
				name, promotionv1alpha1.GitSecretKeySSHPrivateKey, promotionv1alpha1.GitSecretKeyKnownHosts, promotionv1alpha1.GitSecretKeyKnownHosts))
	case has(promotionv1alpha1.GitSecretKeySSHPrivateKey):
		return &source.GitAuth{
			SSHPrivateKey: value(promotionv1alpha1.GitSecretKeySSHPrivateKey),
			SSHPassphrase: value(promotionv1alpha1.GitSecretKeyPassword),
			KnownHosts:    value(promotionv1alpha1.GitSecretKeyKnownHosts),
		}, nil
	case has(promotionv1alpha1.GitSecretKeyAccessToken):
		return &source.GitAuth{Token: value(promotionv1alpha1.GitSecretKeyAccessToken), Username: value(promotionv1alpha1.GitSecretKeyUsername)}, nil
	case has(promotionv1alpha1.GitSecretKeyPassword):
		return &source.GitAuth{Username: value(promotionv1alpha1.GitSecretKeyUsername), Password: value(promotionv1alpha1.GitSecretKeyPassword)}, nil
	}
	return nil, sreconcile.NewMissing(promotionv1alpha1.PipelineReasonReferenceNotFound,
		fmt.Errorf("spec.git.secretRef: Secret %q has none of the keys %s, %s, or %s and %s",
			name, promotionv1alpha1.GitSecretKeySSHPrivateKey, promotionv1alpha1.GitSecretKeyAccessToken, promotionv1alpha1.GitSecretKeyUsername, promotionv1alpha1.GitSecretKeyPassword))
}
