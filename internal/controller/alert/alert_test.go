package alert_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/notify"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

const (
	timeout = 30 * time.Second
	poll    = 100 * time.Millisecond
	sha     = "0123456789abcdef0123456789abcdef01234567"
)

// request is one request a hook received.
type request struct {
	Method, URI string
	Header      http.Header
	Body        []byte
}

// hook is a loopback endpoint that records what it receives; it refuses
// the first fail requests with 500.
type hook struct {
	*httptest.Server
	mu   sync.Mutex
	got  []request
	fail int
}

// newHook starts a hook that refuses the first fail requests.
func newHook(t *testing.T, fail int) *hook {
	h := &hook{fail: fail}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/info/refs") || strings.Contains(r.URL.Path, "git-upload-pack") {
			// A git client of another test package, still polling a git
			// server that had this port before: no notification is a git
			// fetch, and none counts.
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.got = append(h.got, request{Method: r.Method, URI: r.RequestURI, Header: r.Header.Clone(), Body: b})
		if len(h.got) <= h.fail {
			http.Error(w, "not now", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(h.Close)
	return h
}

// requests returns what the hook received so far.
func (h *hook) requests() []request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]request(nil), h.got...)
}

// fixture creates a Pipeline "web" on acme/web, its Release "web-r1" at
// sha and a Stage "prod" that requires an approval from group qa.
func fixture(t *testing.T, ns string) {
	g := NewWithT(t)
	ctx := context.Background()
	p := &promotionv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}
	p.Spec.Git = promotionv1alpha1.GitSubscription{RepoURL: "https://git.example.com/acme/web.git", Branch: "main"}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	st := &promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Name: "prod", Namespace: ns}, Spec: promotionv1alpha1.StageSpec{
		Pipeline: "web", Stacks: []promotionv1alpha1.StackBinding{{Name: "web-prod"}},
		Sources:  promotionv1alpha1.ReleaseSources{Direct: true},
		Approval: &promotionv1alpha1.ApprovalPolicy{Required: 1, From: []promotionv1alpha1.Approver{{Group: "qa"}}},
	}}
	g.Expect(env.Client.Create(ctx, st)).To(Succeed())
	release(t, ns, "web-r1")
}

// release creates a Release of pipeline web at sha.
func release(t *testing.T, ns, name string) {
	r := &promotionv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: promotionv1alpha1.ReleaseSpec{
		Pipeline: "web", Commit: promotionv1alpha1.ReleaseCommit{SHA: sha, Subject: "change the page"},
	}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), r)).To(Succeed())
}

// provider creates a Provider of typ with a Secret holding data.
func provider(t *testing.T, ns, name string, typ notificationv1alpha1.ProviderType, address string, data map[string]string) {
	g := NewWithT(t)
	ctx := context.Background()
	p := &notificationv1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: notificationv1alpha1.ProviderSpec{Type: typ, Address: address}}
	if data != nil {
		g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: data})).To(Succeed())
		p.Spec.SecretRef = &notificationv1alpha1.SecretReference{Name: name}
	}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
}

// newAlert creates an Alert of the events to provider and waits until it
// is Ready.
func newAlert(t *testing.T, ns, name, provider string, events ...notificationv1alpha1.EventType) *notificationv1alpha1.Alert {
	g := NewWithT(t)
	ctx := context.Background()
	a := &notificationv1alpha1.Alert{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: notificationv1alpha1.AlertSpec{
		ProviderRef: notificationv1alpha1.LocalReference{Name: provider}, Events: events,
	}}
	g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
		g.Expect(sreconcile.IsReady(a.Status.Conditions)).To(BeTrue())
	}, timeout, poll).Should(Succeed())
	return a
}

// promote creates a Promotion of web-r1 into prod and writes its status,
// as the promotion controller would.
func promote(t *testing.T, ns, name string, st promotionv1alpha1.PromotionStatus) *promotionv1alpha1.Promotion {
	g := NewWithT(t)
	ctx := context.Background()
	p := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: promotionv1alpha1.PromotionSpec{Stage: "prod", Release: "web-r1"}}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	p.Status = st
	g.Expect(env.Client.Status().Update(ctx, p)).To(Succeed())
	return p
}

// TestAwaitingApproval asks for a promotion that waits for approval: a
// Slack message (to an address kept in a Secret) and a signed webhook
// each arrive once, even when the Promotion changes again.
func TestAwaitingApproval(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t, "alert-")
	fixture(t, ns)
	slack, webhook := newHook(t, 0), newHook(t, 0)
	provider(t, ns, "chat", notificationv1alpha1.ProviderSlack, "", map[string]string{"address": slack.URL + "/services/T0/B0/XYZ"})
	provider(t, ns, "hook", notificationv1alpha1.ProviderWebhook, webhook.URL+"/in", map[string]string{"token": "hmac-key-4f2a"})
	newAlert(t, ns, "chat", "chat", notificationv1alpha1.EventPromotionAwaitingApproval)
	newAlert(t, ns, "hook", "hook", notificationv1alpha1.EventPromotionAwaitingApproval, notificationv1alpha1.EventPromotionSucceeded)

	p := promote(t, ns, "web-r1-prod", promotionv1alpha1.PromotionStatus{
		Phase: promotionv1alpha1.PromotionPending, Reason: promotionv1alpha1.PromotionReasonAwaitingApproval, Message: "waiting for approval: 0 of 1 (from group qa)", Commit: sha,
	})
	g.Eventually(slack.requests, timeout, poll).Should(HaveLen(1))
	g.Eventually(webhook.requests, timeout, poll).Should(HaveLen(1))

	var msg map[string]string
	g.Expect(json.Unmarshal(slack.requests()[0].Body, &msg)).To(Succeed())
	g.Expect(msg["text"]).To(Equal("*Promotion of web-r1 into prod awaits approval*\nPromotion " + ns + "/web-r1-prod\ncommit " + sha +
		"\nwaiting for approval: 0 of 1 (from group qa)\nmay approve: group qa\n" + dashboardURL + "/promotions/" + ns + "/web-r1-prod"))

	w := webhook.requests()[0]
	g.Expect(w.Method).To(Equal(http.MethodPost))
	g.Expect(w.URI).To(Equal("/in"))
	g.Expect(w.Header.Get("X-Signature")).To(Equal("sha256=" + notify.Sign(w.Body, "hmac-key-4f2a")))
	var e notify.Event
	g.Expect(json.Unmarshal(w.Body, &e)).To(Succeed())
	g.Expect(e.Type).To(Equal("PromotionAwaitingApproval"))
	g.Expect(e.Key).To(Equal("promotion/" + string(p.UID) + "/AwaitingApproval"))
	g.Expect(e.Approvers).To(Equal([]string{"group qa"}))
	g.Expect(e.Pipeline).To(Equal("web"))

	// The promotion changes again while it waits: nothing is sent twice.
	p.Status.Message = "waiting for approval: 0 of 1 (from group qa) "
	g.Expect(env.Client.Status().Update(ctx, p)).To(Succeed())
	g.Consistently(slack.requests, 3*time.Second, poll).Should(HaveLen(1))
	g.Expect(webhook.requests()).To(HaveLen(1))

	a := &notificationv1alpha1.Alert{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "chat"}, a)).To(Succeed())
	g.Expect(a.Status.DeliveredCount).To(Equal(int64(1)))
	g.Expect(a.Status.Delivered).To(HaveLen(1))
	g.Expect(a.Status.LastDelivered).NotTo(BeNil())
	raw, _ := json.Marshal(a.Status)
	g.Expect(string(raw)).NotTo(ContainSubstring("XYZ"), "the Secret's address shows in status")
}

// TestSucceededCommitStatus ends a promotion: a Gitea Provider sets the
// release's commit status, in Gitea's REST shape.
func TestSucceededCommitStatus(t *testing.T) {
	g := NewWithT(t)
	ns := env.NewNamespace(t, "alert-")
	fixture(t, ns)
	forge := newHook(t, 0)
	provider(t, ns, "gitea", notificationv1alpha1.ProviderGitea, forge.URL+"/api/v1", map[string]string{"token": "gitea-token-77"})
	newAlert(t, ns, "status", "gitea", notificationv1alpha1.EventPromotionAwaitingApproval, notificationv1alpha1.EventPromotionSucceeded,
		notificationv1alpha1.EventReleaseDiscovered)

	now := metav1.Now()
	promote(t, ns, "web-r1-prod", promotionv1alpha1.PromotionStatus{
		Phase: promotionv1alpha1.PromotionSucceeded, Message: "1 stack updated", Commit: sha, StartTime: &now, EndTime: &now,
	})
	g.Eventually(forge.requests, timeout, poll).Should(HaveLen(1))
	g.Consistently(forge.requests, 2*time.Second, poll).Should(HaveLen(1), "only promotion events make commit statuses")
	r := forge.requests()[0]
	g.Expect(r.Method).To(Equal(http.MethodPost))
	g.Expect(r.URI).To(Equal("/api/v1/repos/acme/web/statuses/" + sha))
	g.Expect(r.Header.Get("Authorization")).To(Equal("token gitea-token-77"))
	g.Expect(r.Header.Get("Content-Type")).To(Equal("application/json"))
	var body map[string]string
	g.Expect(json.Unmarshal(r.Body, &body)).To(Succeed())
	g.Expect(body).To(Equal(map[string]string{
		"state": "success", "context": "stackyard/prod", "description": "Promotion of web-r1 into prod succeeded: 1 stack updated",
		"target_url": dashboardURL + "/promotions/" + ns + "/web-r1-prod",
	}))
}

// TestFailingProviderRetried: a Provider that refuses shows in the
// Alert's status, and the event is sent again until it is accepted.
func TestFailingProviderRetried(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t, "alert-")
	fixture(t, ns)
	flaky := newHook(t, 3)
	provider(t, ns, "flaky", notificationv1alpha1.ProviderWebhook, flaky.URL, nil)
	newAlert(t, ns, "flaky", "flaky", notificationv1alpha1.EventPromotionFailed)
	now := metav1.Now()
	promote(t, ns, "web-r1-prod", promotionv1alpha1.PromotionStatus{
		Phase: promotionv1alpha1.PromotionFailed, Message: "stack web-prod failed", Commit: sha, EndTime: &now,
	})
	a := &notificationv1alpha1.Alert{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flaky"}, a)).To(Succeed())
		g.Expect(a.Status.FailedCount).To(BeNumerically(">=", 1))
	}, timeout, poll).Should(Succeed())
	g.Eventually(flaky.requests, timeout, poll).Should(HaveLen(4))
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flaky"}, a)).To(Succeed())
		g.Expect(a.Status.DeliveredCount).To(Equal(int64(1)))
		g.Expect(a.Status.FailedCount).To(Equal(int64(3)))
		g.Expect(a.Status.LastFailure).To(BeEmpty())
		g.Expect(sreconcile.IsReady(a.Status.Conditions)).To(BeTrue())
	}, timeout, poll).Should(Succeed())
	g.Consistently(flaky.requests, 2*time.Second, poll).Should(HaveLen(4))
}

// TestFailureShownInStatus: a Provider that always refuses leaves the
// Alert not Ready with the refusal in status, without the address its
// Secret holds.
func TestFailureShownInStatus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t, "alert-")
	fixture(t, ns)
	down := newHook(t, 1<<30)
	provider(t, ns, "down", notificationv1alpha1.ProviderSlack, "", map[string]string{"address": down.URL + "/secret-path"})
	a := &notificationv1alpha1.Alert{ObjectMeta: metav1.ObjectMeta{Name: "down", Namespace: ns}, Spec: notificationv1alpha1.AlertSpec{
		ProviderRef: notificationv1alpha1.LocalReference{Name: "down"}, Events: []notificationv1alpha1.EventType{notificationv1alpha1.EventReleaseDiscovered},
	}}
	g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	release(t, ns, "web-r2")
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
		g.Expect(a.Status.LastFailure).To(ContainSubstring("500 Internal Server Error"))
		g.Expect(sreconcile.IsReady(a.Status.Conditions)).To(BeFalse())
		g.Expect(sreconcile.IsReconciling(a.Status.Conditions)).To(BeTrue())
	}, timeout, poll).Should(Succeed())
	raw, _ := json.Marshal(a.Status)
	g.Expect(string(raw)).NotTo(ContainSubstring("secret-path"))
	g.Expect(string(raw)).NotTo(ContainSubstring(strings.TrimPrefix(down.URL, "http://")))
}

// TestNamespacesApart: an Alert reports the releases of its own namespace
// only.
func TestNamespacesApart(t *testing.T) {
	g := NewWithT(t)
	ns, other := env.NewNamespace(t, "alert-"), env.NewNamespace(t, "alert-other-")
	fixture(t, ns)
	h := newHook(t, 0)
	provider(t, ns, "hook", notificationv1alpha1.ProviderWebhook, h.URL, nil)
	newAlert(t, ns, "releases", "hook", notificationv1alpha1.EventReleaseDiscovered)
	fixture(t, other) // web-r1 in the other namespace
	release(t, other, "web-r2")
	release(t, ns, "web-r2")
	// web-r1 of ns may be reported too: it can be as old as the Alert,
	// to the second the API server records.
	names := func() []string {
		var out []string
		for _, r := range h.requests() {
			var e notify.Event
			g.Expect(json.Unmarshal(r.Body, &e)).To(Succeed())
			out = append(out, e.Namespace+"/"+e.Name)
		}
		return out
	}
	g.Eventually(names, timeout, poll).Should(ContainElement(ns + "/web-r2"))
	g.Consistently(names, 3*time.Second, poll).Should(HaveEach(HavePrefix(ns+"/")), "an Alert reported another namespace")
}

// TestInvalidProviderStalls: an address that is not http(s), set in the
// Secret where the API server cannot check it, stalls the Alert naming
// the field.
func TestInvalidProviderStalls(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t, "alert-")
	provider(t, ns, "bad", notificationv1alpha1.ProviderSlack, "", map[string]string{"address": "ftp://files.example.com/x"})
	a := &notificationv1alpha1.Alert{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: ns}, Spec: notificationv1alpha1.AlertSpec{
		ProviderRef: notificationv1alpha1.LocalReference{Name: "bad"}, Events: []notificationv1alpha1.EventType{notificationv1alpha1.EventReleaseDiscovered},
	}}
	g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
		g.Expect(sreconcile.IsStalled(a.Status.Conditions)).To(BeTrue())
	}, timeout, poll).Should(Succeed())
	raw, _ := json.Marshal(a.Status.Conditions)
	g.Expect(string(raw)).To(ContainSubstring(`key \"address\" of Secret \"bad\": must be an http:// or https:// URL`))
	g.Expect(string(raw)).NotTo(ContainSubstring("files.example.com"))

	// The API server refuses such an address in spec.
	p := &notificationv1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "bad2", Namespace: ns},
		Spec: notificationv1alpha1.ProviderSpec{Type: notificationv1alpha1.ProviderSlack, Address: "ftp://x"}}
	g.Expect(env.Client.Create(ctx, p)).To(MatchError(ContainSubstring("address: must be an http:// or https:// URL")))
}
