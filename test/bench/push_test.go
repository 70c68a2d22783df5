//go:build bench

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	"github.com/stackyard/stackyard/internal/receiver"
	"github.com/stackyard/stackyard/test/testenv"
)

// PushResult is a push delivered to a Receiver, against the same change
// deployed by hand.
type PushResult struct {
	// Release is push delivered → the Pipeline's Release of the commit
	// created, per repetition.
	Release Spread `json:"release"`
	// Ready is push delivered → the branch-tracking Stack Ready at the
	// commit.
	Ready Spread `json:"ready"`
	// Bare is `pulumi up` of the same change by hand.
	Bare Spread `json:"bare"`
	// Added is Ready minus Bare.
	Added Spread `json:"added"`
}

// pushRepo is the repository the push figure's objects follow.
const pushRepo = "push"

// benchPush measures repeat pushes: a Pipeline and a branch-tracking
// Stack follow a repository and poll only once an hour; each repetition
// commits, delivers the push to a Receiver as a generic signed webhook,
// and times until the Release exists and until the Stack is Ready at the
// commit; then the same change is deployed by hand.
func benchPush(t *testing.T, h *harness, repeat int) *PushResult {
	const ns, token = "push", "bench-receiver-token"
	h.createNamespace(t, ns)
	ctx := context.Background()
	outDir, bareDir := t.TempDir(), t.TempDir()
	repo := h.git.CreateRepo(pushRepo)
	head := repo.Commit("main", map[string]string{"Pulumi.yaml": promoProgram(outDir, "push-0")})

	stack := h.stack(ns, "push", "push", "")
	stack.Spec.GitSource = &shared.GitSource{ProjectRepo: repo.URL, Branch: "main"}
	stack.Spec.ResyncFrequencySeconds = 3600
	delete(stack.Spec.Config, project+":message")
	objs := []client.Object{
		stack,
		&promotionv1alpha1.Pipeline{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "push"},
			Spec: promotionv1alpha1.PipelineSpec{
				Git:      promotionv1alpha1.GitSubscription{RepoURL: repo.URL, Branch: "main"},
				Interval: &metav1.Duration{Duration: time.Hour},
			},
		},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "push-token"}, StringData: map[string]string{notificationv1alpha1.ReceiverTokenKey: token}},
		&notificationv1alpha1.Receiver{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "push"},
			Spec:       notificationv1alpha1.ReceiverSpec{Type: notificationv1alpha1.ReceiverGeneric, SecretRef: notificationv1alpha1.SecretReference{Name: "push-token"}},
		},
	}
	for _, obj := range objs {
		if err := h.client.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
	if _, err := waitCommit(ctx, h, ns, "push", head, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	var rcv notificationv1alpha1.Receiver
	if !waitFor(time.Minute, func() bool {
		return h.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "push"}, &rcv) == nil && rcv.Status.WebhookPath != ""
	}) {
		t.Fatal("the Receiver has no path after a minute")
	}
	url := h.receiverURL + rcv.Status.WebhookPath
	if err := testenv.AwaitWebhook(url, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bareDir, "Pulumi.yaml"), []byte(promoProgram(outDir, "push-0")), 0o644); err != nil {
		t.Fatal(err)
	}
	bare := func(args ...string) (time.Duration, error) { return h.pulumiIn(bareDir, args...) }
	if _, err := bare("stack", "init", "--no-select", "--stack", "push-bare"); err != nil {
		t.Fatal(err)
	}
	if _, err := bare("up", "--stack", "push-bare", "--yes", "--skip-preview"); err != nil {
		t.Fatal(err)
	}

	var releases, readies, bares, added []float64
	for i := 1; i <= repeat; i++ {
		content := fmt.Sprintf("push-%d", i)
		sha := repo.Commit("main", map[string]string{"Pulumi.yaml": promoProgram(outDir, content)})
		body, _ := json.Marshal(map[string]string{"repository": repo.URL, "ref": "refs/heads/main"})
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("X-Signature", "sha256="+receiver.Sign(body, token))
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("the Receiver answered %d", resp.StatusCode)
		}
		var releasedAt time.Time
		if !waitFor(time.Minute, func() bool {
			var list promotionv1alpha1.ReleaseList
			if h.client.List(ctx, &list, client.InNamespace(ns)) != nil {
				return false
			}
			for _, r := range list.Items {
				if r.Spec.Commit.SHA == sha {
					releasedAt = time.Now()
					return true
				}
			}
			return false
		}) {
			t.Fatalf("no Release of %s a minute after the push", sha)
		}
		readyAt, err := waitCommit(ctx, h, ns, "push", sha, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bareDir, "Pulumi.yaml"), []byte(promoProgram(outDir, content)), 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := bare("up", "--stack", "push-bare", "--yes", "--skip-preview")
		if err != nil {
			t.Fatal(err)
		}
		ready := readyAt.Sub(start)
		releases = append(releases, releasedAt.Sub(start).Seconds())
		readies = append(readies, ready.Seconds())
		bares = append(bares, b.Seconds())
		added = append(added, (ready - b).Seconds())
		t.Logf("push %d: Release after %.3fs, Stack Ready after %.2fs; by hand %.2fs", i, releasedAt.Sub(start).Seconds(), ready.Seconds(), b.Seconds())
	}
	return &PushResult{Release: spreadOf(releases), Ready: spreadOf(readies), Bare: spreadOf(bares), Added: spreadOf(added)}
}
