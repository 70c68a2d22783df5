package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
)

// succeeded is a promotion event as the Alert controller makes it.
func succeeded() *Event {
	return &Event{
		Type: "PromotionSucceeded", Key: "promotion/u1/Succeeded", Time: time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC),
		Namespace: "team", Kind: "Promotion", Name: "web-r1-prod", Stage: "prod", Pipeline: "web", Release: "web-r1",
		Commit: "0123456789abcdef0123456789abcdef01234567", Phase: "Succeeded", Message: "2 stacks updated",
		URL: "https://dash.example.com/promotions/team/web-r1-prod", RepoURL: "https://git.example.com/acme/web.git",
	}
}

// received is one request a test server got.
type received struct {
	method, uri string
	header      http.Header
	body        []byte
}

// server records the requests it gets and answers with status.
func server(t *testing.T, status int) (*httptest.Server, chan received) {
	ch := make(chan received, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- received{method: r.Method, uri: r.RequestURI, header: r.Header, body: b}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"message":"seen token-123 here"}`))
	}))
	t.Cleanup(srv.Close)
	return srv, ch
}

// send delivers e to a Target of typ at a fresh server and returns what
// the server received.
func send(t *testing.T, typ notificationv1alpha1.ProviderType, token string, e *Event) received {
	t.Helper()
	g := NewWithT(t)
	srv, ch := server(t, http.StatusCreated)
	g.Expect(NewSender().Send(context.Background(), Target{Type: typ, Address: srv.URL + "/api", Token: token}, e)).To(Succeed())
	return <-ch
}

// decode decodes a JSON body into a generic map.
func decode(g Gomega, b []byte) map[string]any {
	var m map[string]any
	g.Expect(json.Unmarshal(b, &m)).To(Succeed())
	return m
}

func TestWebhookSigned(t *testing.T) {
	g := NewWithT(t)
	r := send(t, notificationv1alpha1.ProviderWebhook, "token-123", succeeded())
	g.Expect(r.method).To(Equal(http.MethodPost))
	g.Expect(r.uri).To(Equal("/api"))
	g.Expect(r.header.Get("Content-Type")).To(Equal("application/json"))
	g.Expect(r.header.Get("X-Signature")).To(Equal("sha256=" + Sign(r.body, "token-123")))
	m := decode(g, r.body)
	g.Expect(m).To(Equal(map[string]any{
		"event": "PromotionSucceeded", "key": "promotion/u1/Succeeded", "time": "2025-05-01T12:00:00Z",
		"namespace": "team", "kind": "Promotion", "name": "web-r1-prod", "stage": "prod", "pipeline": "web",
		"release": "web-r1", "commit": "0123456789abcdef0123456789abcdef01234567", "phase": "Succeeded",
		"message": "2 stacks updated", "url": "https://dash.example.com/promotions/team/web-r1-prod",
	}), "the repository URL is not sent")
	g.Expect(string(r.body)).NotTo(ContainSubstring("token-123"))
}

func TestSign(t *testing.T) {
	// The HMAC-SHA256 of "hello" with the key "key" (RFC 2104 construction).
	NewWithT(t).Expect(Sign([]byte("hello"), "key")).To(Equal("9307b3b915efb5171ff14d8cb55fbcc798c6c0ef1456d66ded1a6aa723a58b7b"))
}

func TestWebhookUnsignedWithoutToken(t *testing.T) {
	r := send(t, notificationv1alpha1.ProviderWebhook, "", succeeded())
	NewWithT(t).Expect(r.header.Values("X-Signature")).To(BeEmpty())
}

func TestSlackMessage(t *testing.T) {
	g := NewWithT(t)
	e := succeeded()
	e.Type, e.Approvers = "PromotionAwaitingApproval", []string{"group qa", "user alice"}
	r := send(t, notificationv1alpha1.ProviderSlack, "", e)
	m := decode(g, r.body)
	g.Expect(m).To(HaveLen(1))
	g.Expect(m["text"]).To(Equal("*Promotion of web-r1 into prod awaits approval*\nPromotion team/web-r1-prod\n" +
		"commit 0123456789abcdef0123456789abcdef01234567\n2 stacks updated\nmay approve: group qa, user alice\n" +
		"https://dash.example.com/promotions/team/web-r1-prod"))
}

func TestTeamsCard(t *testing.T) {
	g := NewWithT(t)
	r := send(t, notificationv1alpha1.ProviderTeams, "", succeeded())
	m := decode(g, r.body)
	g.Expect(m).To(HaveKeyWithValue("@type", "MessageCard"))
	g.Expect(m).To(HaveKeyWithValue("@context", "https://schema.org/extensions"))
	g.Expect(m).To(HaveKeyWithValue("summary", "Promotion of web-r1 into prod succeeded"))
	g.Expect(m).To(HaveKeyWithValue("title", "Promotion of web-r1 into prod succeeded"))
	g.Expect(m["text"]).To(ContainSubstring("2 stacks updated"))
	g.Expect(m).To(HaveLen(5))
}

// The commit-status requests below follow each forge's REST
// documentation; the forges themselves cannot run here, so loopback
// servers check method, path, headers and body as documented.

func TestGiteaStatus(t *testing.T) {
	g := NewWithT(t)
	r := send(t, notificationv1alpha1.ProviderGitea, "gitea-token", succeeded())
	g.Expect(r.method).To(Equal(http.MethodPost))
	g.Expect(r.uri).To(Equal("/api/repos/acme/web/statuses/0123456789abcdef0123456789abcdef01234567"))
	g.Expect(r.header.Get("Authorization")).To(Equal("token gitea-token"))
	g.Expect(decode(g, r.body)).To(Equal(map[string]any{
		"state": "success", "context": "stackyard/prod", "target_url": "https://dash.example.com/promotions/team/web-r1-prod",
		"description": "Promotion of web-r1 into prod succeeded: 2 stacks updated",
	}))
}

func TestGitHubStatus(t *testing.T) {
	g := NewWithT(t)
	e := succeeded()
	e.Type, e.RepoURL, e.URL = "PromotionFailed", "git@github.com:acme/web.git", ""
	r := send(t, notificationv1alpha1.ProviderGitHub, "gh-token", e)
	g.Expect(r.uri).To(Equal("/api/repos/acme/web/statuses/0123456789abcdef0123456789abcdef01234567"))
	g.Expect(r.header.Get("Authorization")).To(Equal("Bearer gh-token"))
	g.Expect(r.header.Get("Accept")).To(Equal("application/vnd.github+json"))
	g.Expect(decode(g, r.body)).To(Equal(map[string]any{
		"state": "failure", "context": "stackyard/prod", "description": "Promotion of web-r1 into prod failed: 2 stacks updated",
	}), "no target_url without a dashboard")
}

func TestGitLabStatus(t *testing.T) {
	g := NewWithT(t)
	e := succeeded()
	e.Type, e.RepoURL = "PromotionAwaitingApproval", "https://gitlab.example.com/acme/infra/web.git"
	e.Message = strings.Repeat("x", 300)
	r := send(t, notificationv1alpha1.ProviderGitLab, "gl-token", e)
	g.Expect(r.uri).To(Equal("/api/projects/acme%2Finfra%2Fweb/statuses/0123456789abcdef0123456789abcdef01234567"))
	g.Expect(r.header.Get("PRIVATE-TOKEN")).To(Equal("gl-token"))
	g.Expect(r.header.Values("Authorization")).To(BeEmpty())
	m := decode(g, r.body)
	g.Expect(m).To(HaveKeyWithValue("state", "pending"))
	g.Expect(m).To(HaveKeyWithValue("name", "stackyard/prod"))
	g.Expect(m).To(HaveKeyWithValue("target_url", "https://dash.example.com/promotions/team/web-r1-prod"))
	g.Expect(m["description"]).To(HaveLen(140))
	g.Expect(m).To(HaveLen(4))
}

func TestSupports(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Supports(notificationv1alpha1.ProviderGitea, notificationv1alpha1.EventStackStalled)).To(BeFalse())
	g.Expect(Supports(notificationv1alpha1.ProviderGitLab, notificationv1alpha1.EventRolledBack)).To(BeTrue())
	g.Expect(Supports(notificationv1alpha1.ProviderSlack, notificationv1alpha1.EventReleaseDiscovered)).To(BeTrue())
}

func TestRefusalHidesSecrets(t *testing.T) {
	g := NewWithT(t)
	srv, _ := server(t, http.StatusUnauthorized)
	err := NewSender().Send(context.Background(), Target{Type: notificationv1alpha1.ProviderSlack, Address: srv.URL + "/T0/B0/secretpath", Token: "token-123", AddressFromSecret: true}, succeeded())
	g.Expect(err).To(MatchError(ContainSubstring("401 Unauthorized")))
	g.Expect(err.Error()).NotTo(ContainSubstring("token-123"))
	g.Expect(err.Error()).NotTo(ContainSubstring("secretpath"))
	g.Expect(err.Error()).NotTo(ContainSubstring(strings.TrimPrefix(srv.URL, "http://")))

	srv.Close()
	err = NewSender().Send(context.Background(), Target{Type: notificationv1alpha1.ProviderSlack, Address: srv.URL + "/secretpath", AddressFromSecret: true}, succeeded())
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).NotTo(ContainSubstring("secretpath"))
	g.Expect(err.Error()).NotTo(ContainSubstring(strings.TrimPrefix(srv.URL, "http://")))
}

func TestRefusesMetadataAndForeignRedirects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	err := (&Sender{Timeout: 2 * time.Second}).Send(ctx, Target{Type: notificationv1alpha1.ProviderWebhook, Address: "http://169.254.169.254/latest"}, succeeded())
	g.Expect(err).To(MatchError(ContainSubstring("link-local")))

	other, got := server(t, http.StatusOK)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+"/x", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	err = NewSender().Send(ctx, Target{Type: notificationv1alpha1.ProviderWebhook, Address: redirect.URL}, succeeded())
	g.Expect(err).To(MatchError(ContainSubstring("redirect")))
	g.Expect(got).To(BeEmpty())
}

func TestValidate(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Validate("https://hooks.example.com/x", "spec.address")).To(Succeed())
	g.Expect(Validate("ftp://x", "spec.address")).To(MatchError("spec.address: must be an http:// or https:// URL"))
	g.Expect(Validate("", "spec.address")).To(MatchError("spec.address: no address"))
}
