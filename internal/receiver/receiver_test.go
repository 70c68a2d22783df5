package receiver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/receiver"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/test/forge"
	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/testenv"
)

// opTimeout bounds a wait that includes a Pulumi operation: a guard
// against a hang, not a measurement.
const opTimeout = 3 * time.Minute

// project writes content to the file its config key web:path names.
func project(content string) string {
	return fmt.Sprintf("name: web\nruntime: yaml\nconfig:\n  path:\n    type: string\nresources:\n  page:\n    type: stackyardtest:index:File\n    properties:\n      path: ${path}\n      content: %s\n", content)
}

// newReceiver creates a Receiver of typ with its Secret in ns and returns
// its URL once the operator has published its path.
func newReceiver(t *testing.T, ns, name string, typ notificationv1alpha1.ReceiverType, token string) string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-token", Namespace: ns},
		StringData: map[string]string{notificationv1alpha1.ReceiverTokenKey: token}})).To(Succeed())
	rcv := &notificationv1alpha1.Receiver{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: notificationv1alpha1.ReceiverSpec{Type: typ, SecretRef: notificationv1alpha1.SecretReference{Name: name + "-token"}}}
	g.Expect(env.Client.Create(ctx, rcv)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(rcv), rcv)).To(Succeed())
		g.Expect(sreconcile.IsReady(rcv.Status.Conditions)).To(BeTrue())
		g.Expect(rcv.Status.WebhookPath).To(HavePrefix(receiver.PathPrefix))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(rcv.Status.WebhookPath).NotTo(ContainSubstring(name), "the path names the Receiver")
	url := receiverURL + rcv.Status.WebhookPath
	g.Expect(testenv.AwaitWebhook(url, 10*time.Second)).To(Succeed())
	return url
}

// post sends body to url with the headers and returns the status code.
func post(g Gomega, url string, header http.Header, body []byte) int {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	return resp.StatusCode
}

// giteaDelivery is a push as Gitea delivers it: its event, delivery id and
// signature headers, and the repository's URLs in the body.
func giteaDelivery(repoURL, ref, token, delivery string) (http.Header, []byte) {
	body, _ := json.Marshal(map[string]any{
		"ref":        ref,
		"repository": map[string]any{"clone_url": repoURL, "html_url": strings.TrimSuffix(repoURL, ".git")},
	})
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Gitea-Event", "push")
	h.Set("X-Gitea-Delivery", delivery)
	h.Set("X-Gitea-Signature", receiver.Sign(body, token))
	return h, body
}

// newPipeline creates a Pipeline "web" in ns following main of repoURL,
// polling only once an hour.
func newPipeline(g Gomega, ns, repoURL string) {
	p := &promotionv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}
	p.Spec.Git = promotionv1alpha1.GitSubscription{RepoURL: repoURL, Branch: "main"}
	p.Spec.Interval = &metav1.Duration{Duration: time.Hour}
	g.Expect(env.Client.Create(context.Background(), p)).To(Succeed())
}

// newStack creates a Stack "web" in ns tracking main of repoURL, looking
// again only once an hour, and returns the file its program writes.
func newStack(t *testing.T, ns, repoURL string) string {
	dir := testenv.LiveDir(t)
	NewWithT(t).Expect(os.MkdirAll(filepath.Join(dir, "state"), 0o755)).To(Succeed())
	target := filepath.Join(dir, "page.txt")
	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: shared.StackSpec{
		Stack: "dev", Backend: "file://" + filepath.Join(dir, "state"),
		Config:                 map[string]apiextensionsv1.JSON{"web:path": {Raw: []byte(fmt.Sprintf("%q", target))}},
		GitSource:              &shared.GitSource{ProjectRepo: repoURL, Branch: "main"},
		ResyncFrequencySeconds: 3600,
	}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), stack)).To(Succeed())
	return target
}

// releaseCommits lists the commits of the Releases of ns.
func releaseCommits(g Gomega, ns string) []string {
	var list promotionv1alpha1.ReleaseList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var shas []string
	for _, r := range list.Items {
		shas = append(shas, r.Spec.Commit.SHA)
	}
	return shas
}

// TestPushWakes pushes to a repository that a Pipeline and a
// branch-tracking Stack follow, both polling only once an hour, and
// delivers the push to a Receiver: the Pipeline records the release and
// the Stack deploys the commit at once. A Pipeline of another namespace
// on the same repository is not woken.
func TestPushWakes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t, "receiver-")
	other := env.NewNamespace(t, "receiver-other-")
	repo := gitserver.New(t).CreateRepo("web")
	repo.Commit("main", map[string]string{"Pulumi.yaml": project("v1")})

	for _, n := range []string{ns, other} {
		newPipeline(g, n, repo.URL)
	}
	target := newStack(t, ns, repo.URL)
	g.Eventually(func() string { b, _ := os.ReadFile(target); return string(b) }, opTimeout, 200*time.Millisecond).Should(Equal("v1"))
	releases := func(n string) []string { return releaseCommits(g, n) }
	g.Eventually(func() []string { return releases(ns) }, 30*time.Second, 200*time.Millisecond).Should(HaveLen(1))
	g.Eventually(func() []string { return releases(other) }, 30*time.Second, 200*time.Millisecond).Should(HaveLen(1))

	const token = "receiver-token-6b0d"
	url := newReceiver(t, ns, "forge", notificationv1alpha1.ReceiverGitea, token)
	c2 := repo.Commit("main", map[string]string{"Pulumi.yaml": project("v2")})
	h, body := giteaDelivery(repo.URL, "refs/heads/main", token, "delivery-1")
	g.Expect(post(g, url, h, body)).To(Equal(http.StatusAccepted))

	// Woken, not polled: both would otherwise wait an hour.
	g.Eventually(func() []string { return releases(ns) }, 30*time.Second, 100*time.Millisecond).Should(ContainElement(c2))
	g.Eventually(func() string { b, _ := os.ReadFile(target); return string(b) }, opTimeout, 200*time.Millisecond).Should(Equal("v2"))
	g.Consistently(func() []string { return releases(other) }, 3*time.Second, 200*time.Millisecond).Should(HaveLen(1),
		"a Receiver woke a Pipeline of another namespace")
	rcv := &notificationv1alpha1.Receiver{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "forge"}, rcv)).To(Succeed())
	g.Expect(rcv.Status.LastHeard).NotTo(BeNil())
}

// TestRefused sends what must not wake anything: a wrong signature, a
// replayed delivery, an oversize body, an unknown path, another method, a
// repository nobody follows. Each gets its status, and the Pipeline's
// reconcile request stays as it was.
func TestRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t, "receiver-refused-")
	repo := gitserver.New(t).CreateRepo("web")
	repo.Commit("main", map[string]string{"Pulumi.yaml": project("v1")})
	p := &promotionv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}
	p.Spec.Git = promotionv1alpha1.GitSubscription{RepoURL: repo.URL, Branch: "main"}
	p.Spec.Interval = &metav1.Duration{Duration: time.Hour}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	const token = "receiver-token-91aa"
	url := newReceiver(t, ns, "forge", notificationv1alpha1.ReceiverGitea, token)
	requested := func() string {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		return p.Annotations[shared.ReconcileRequestAnnotation]
	}

	h, body := giteaDelivery(repo.URL, "refs/heads/main", "not-the-token", "d-1")
	g.Expect(post(g, url, h, body)).To(Equal(http.StatusUnauthorized))
	h, body = giteaDelivery("http://127.0.0.1:1/nobody/follows.git", "refs/heads/main", token, "d-2")
	g.Expect(post(g, url, h, body)).To(Equal(http.StatusAccepted))
	g.Expect(post(g, receiverURL+receiver.PathPrefix+strings.Repeat("0", 64), h, body)).To(Equal(http.StatusNotFound))
	big := bytes.Repeat([]byte(" "), receiver.MaxBody+1)
	hb, _ := giteaDelivery(repo.URL, "refs/heads/main", token, "d-3")
	hb.Set("X-Gitea-Signature", receiver.Sign(big, token))
	g.Expect(post(g, url, hb, big)).To(Equal(http.StatusRequestEntityTooLarge))
	resp, err := http.Get(url)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusMethodNotAllowed))
	g.Expect(requested()).To(BeEmpty(), "a refused request woke the Pipeline")

	h, body = giteaDelivery(repo.URL, "refs/heads/main", token, "d-4")
	g.Expect(post(g, url, h, body)).To(Equal(http.StatusAccepted))
	first := requested()
	g.Expect(first).To(HavePrefix("receiver/forge/"))
	g.Expect(post(g, url, h, body)).To(Equal(http.StatusConflict), "a replay was accepted")
	g.Expect(requested()).To(Equal(first), "a replay woke the Pipeline again")
}

// TestGiteaWebhook runs a push through a real forge: Gitea delivers its
// own webhook, signed with the Receiver's token, and the Pipeline and the
// branch-tracking Stack that follow the repository, polling once an hour,
// act at once. A webhook Gitea signs with another secret is refused, and
// wakes nothing.
func TestGiteaWebhook(t *testing.T) {
	g := NewWithT(t)
	ns := env.NewNamespace(t, "receiver-gitea-")
	gitea := forge.StartGitea(t)
	repoURL := gitea.CreateRepo("web")
	local := gitserver.New(t).CreateRepo("web")
	push := func(content string) string {
		sha := local.Commit("main", map[string]string{"Pulumi.yaml": project(content)})
		local.Git("push", gitea.PushURL("web"), "main")
		gitea.WaitBranch("web", "main", sha)
		return sha
	}
	c1 := push("v1")
	newPipeline(g, ns, repoURL)
	target := newStack(t, ns, repoURL)
	g.Eventually(func() string { b, _ := os.ReadFile(target); return string(b) }, opTimeout, 200*time.Millisecond).Should(Equal("v1"))
	g.Eventually(func() []string { return releaseCommits(g, ns) }, 30*time.Second, 200*time.Millisecond).Should(ConsistOf(c1))

	const token = "receiver-token-gitea-3c7e"
	url := newReceiver(t, ns, "gitea", notificationv1alpha1.ReceiverGitea, token)
	gitea.AddWebhook("web", url, "another-secret", "push")
	push("v2")
	refused := func() bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "refused a request with a wrong signature") && strings.Contains(line, `"`+ns+`/gitea"`) {
				return true
			}
		}
		return false
	}
	g.Eventually(refused, 30*time.Second, 200*time.Millisecond).Should(BeTrue(), "Gitea's delivery did not arrive")
	g.Consistently(func() []string { return releaseCommits(g, ns) }, 2*time.Second, 200*time.Millisecond).Should(ConsistOf(c1),
		"a delivery with a wrong signature woke the Pipeline")

	gitea.AddWebhook("web", url, token, "push")
	c3 := push("v3")
	g.Eventually(func() []string { return releaseCommits(g, ns) }, 30*time.Second, 100*time.Millisecond).Should(ContainElement(c3))
	g.Eventually(func() string { b, _ := os.ReadFile(target); return string(b) }, opTimeout, 200*time.Millisecond).Should(Equal("v3"))
}
