package devenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	"github.com/stackyard/stackyard/internal/receiver"
)

// receiverFile, in the state directory, says where `stackyard dev notify`
// posts a commit and with which token (readable by the developer only).
const receiverFile = "receiver.json"

// hookTarget is what receiverFile holds.
type hookTarget struct {
	// URL is the Receiver's webhook URL.
	URL string `json:"url"`
	// Token signs the request.
	Token string `json:"token"`
	// RepoURL is the sample repository's URL, as the Stack and the
	// Pipeline follow it.
	RepoURL string `json:"repoURL"`
}

// gitHooks are the sample repository's hooks that tell the operator of a
// new commit: a commit, an amend or rebase, a merge or pull.
var gitHooks = []string{"post-commit", "post-rewrite", "post-merge"}

// EnsureReceiver makes a commit in the sample repository reach the
// operator at once instead of at the next poll: a generic Receiver named
// after the sample, with its token in a Secret (made once), and git hooks
// in the sample repository that run `stackyard dev notify`, which posts
// the commit to the Receiver's URL under endpoint. stackyard is the
// binary the hooks run.
func (s *Sample) EnsureReceiver(ctx context.Context, c client.Client, stateDir, endpoint, repoURL, stackyard string) error {
	ns := corev1.NamespaceDefault
	secret := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: SampleName + "-receiver"}, secret)
	if apierrors.IsNotFound(err) {
		raw := make([]byte, 24)
		if _, err := rand.Read(raw); err != nil {
			return err
		}
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: SampleName + "-receiver"},
			Data: map[string][]byte{notificationv1alpha1.ReceiverTokenKey: []byte(hex.EncodeToString(raw))}}
		err = c.Create(ctx, secret)
	}
	if err != nil {
		return fmt.Errorf("the sample Receiver's Secret: %w", err)
	}
	rcv := &notificationv1alpha1.Receiver{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: SampleName},
		Spec: notificationv1alpha1.ReceiverSpec{Type: notificationv1alpha1.ReceiverGeneric,
			SecretRef: notificationv1alpha1.SecretReference{Name: secret.Name}}}
	if err := c.Create(ctx, rcv); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("the sample Receiver: %w", err)
	}
	var path string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(rcv), rcv); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		path = rcv.Status.WebhookPath
		return path != "", nil
	})
	if err != nil {
		return fmt.Errorf("the sample Receiver has no webhook path: %w", err)
	}
	target, err := json.Marshal(hookTarget{URL: endpoint + path, Token: string(secret.Data[notificationv1alpha1.ReceiverTokenKey]), RepoURL: repoURL})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(stateDir, receiverFile), target, 0o600); err != nil {
		return err
	}
	hook := fmt.Sprintf("#!/bin/sh\n# Written by `stackyard dev`: tells it of each commit, so that the sample\n# Stack and pipeline need not wait for their next poll.\n%q dev notify --state-dir %q || true\n",
		stackyard, stateDir)
	for _, name := range gitHooks {
		if err := os.WriteFile(filepath.Join(s.RepoDir, ".git", "hooks", name), []byte(hook), 0o755); err != nil {
			return fmt.Errorf("installing the sample repository's %s hook: %w", name, err)
		}
	}
	return nil
}

// Notify tells the `stackyard dev` running with stateDir that the sample
// repository's current branch has a new commit: a generic push, signed
// with the Receiver's token. It says so in the error when that
// `stackyard dev` is not running (the next poll then finds the commit).
func Notify(ctx context.Context, stateDir string) error {
	data, err := os.ReadFile(filepath.Join(stateDir, receiverFile))
	if err != nil {
		return fmt.Errorf("no running stackyard dev to tell (%w)", err)
	}
	var target hookTarget
	if err := json.Unmarshal(data, &target); err != nil {
		return fmt.Errorf("reading %s: %w", receiverFile, err)
	}
	branch, err := git(sampleRepoDir(stateDir), "symbolic-ref", "-q", "HEAD")
	if err != nil {
		return errors.New("the sample repository is on no branch (a detached HEAD): nothing to tell")
	}
	body, err := json.Marshal(map[string]string{"repository": target.RepoURL, "ref": strings.TrimSpace(branch)})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Signature", "sha256="+receiver.Sign(body, target.Token))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("stackyard dev is not running, or not listening at %s: the next poll finds the commit", target.URL)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("the sample Receiver answered %s", resp.Status)
	}
	return nil
}
