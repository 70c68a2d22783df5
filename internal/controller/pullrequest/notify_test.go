package pullrequest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/pipelinectl"
	"github.com/stackyard/stackyard/test/forge"
)

// This suite is the one that runs the whole operator beside a real forge,
// so the notifications' end-to-end test lives here too (the Alert
// controller's own suite writes the Promotions' status by hand).

// TestNotificationsEndToEnd promotes the release of main into a stage that
// needs an approval, with the whole operator: waiting for approval, a
// Slack-format message reaches a loopback server and Gitea shows a pending
// commit status for the stage on the release's commit; approved, the
// promotion succeeds and the status turns to success.
func TestNotificationsEndToEnd(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)

	f.editStage(t, "staging", func(stage *promotionv1alpha1.Stage) {
		stage.Spec.Approval = &promotionv1alpha1.ApprovalPolicy{Required: 1}
	})

	var (
		mu    sync.Mutex
		slack []map[string]any
	)
	chat := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg map[string]any
		_ = json.Unmarshal(body, &msg)
		mu.Lock()
		slack = append(slack, msg)
		mu.Unlock()
	}))
	t.Cleanup(chat.Close)
	messages := func() []map[string]any { mu.Lock(); defer mu.Unlock(); return append([]map[string]any(nil), slack...) }
	provider := func(name string, typ notificationv1alpha1.ProviderType, address string, data map[string]string) {
		g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}, StringData: data})).To(Succeed())
		g.Expect(env.Client.Create(ctx, &notificationv1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
			Spec: notificationv1alpha1.ProviderSpec{Type: typ, Address: address, SecretRef: &notificationv1alpha1.SecretReference{Name: name}}})).To(Succeed())
	}
	provider("chat", notificationv1alpha1.ProviderSlack, "", map[string]string{"address": chat.URL + "/services/T0/B0/XYZ"})
	provider("gitea", notificationv1alpha1.ProviderGitea, f.gitea.URL+"/api/v1", map[string]string{"token": f.gitea.Token})
	for name, events := range map[string][]notificationv1alpha1.EventType{
		"chat":   {notificationv1alpha1.EventPromotionAwaitingApproval},
		"status": {notificationv1alpha1.EventPromotionAwaitingApproval, notificationv1alpha1.EventPromotionSucceeded},
	} {
		ref := name
		if name == "status" {
			ref = "gitea"
		}
		g.Expect(env.Client.Create(ctx, &notificationv1alpha1.Alert{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
			Spec: notificationv1alpha1.AlertSpec{ProviderRef: notificationv1alpha1.LocalReference{Name: ref}, Events: events}})).To(Succeed())
	}

	var release promotionv1alpha1.Release
	g.Eventually(func(g Gomega) {
		var list promotionv1alpha1.ReleaseList
		g.Expect(env.Client.List(ctx, &list, client.InNamespace(f.ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
		release = list.Items[0]
	}, time.Minute, poll).Should(Succeed())
	rita := actAs(t, f.ns, "rita", rule("stages", "get", "approve"), rule("promotions", "get", "create"), rule("releases", "get", "list"), rule("approvals", "create"))
	p, err := rita.Promote(ctx, pipelinectl.Request{Stage: "staging", Release: release.Name})
	g.Expect(err).NotTo(HaveOccurred())

	g.Eventually(messages, opTimeout, poll).Should(ContainElement(HaveKeyWithValue("text", ContainSubstring("Promotion of "+release.Name+" into staging awaits approval"))))
	sha := release.Spec.Commit.SHA
	g.Eventually(func() ([]forge.CommitStatus, error) { return f.gitea.Statuses("web", sha) }, 30*time.Second, poll).Should(ContainElement(SatisfyAll(
		HaveField("Context", "stackyard/staging"), HaveField("State", "pending"),
		HaveField("TargetURL", dashboardURL+"/promotions/"+f.ns+"/"+p.Name))))

	alice := actAs(t, f.ns, "alice", rule("stages", "get", "approve"), rule("promotions", "get"), rule("approvals", "create"))
	_, err = alice.Decide(ctx, pipelinectl.Decision{Promotion: p.Name, Comment: "fine"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() ([]forge.CommitStatus, error) { return f.gitea.Statuses("web", sha) }, opTimeout, poll).Should(ContainElement(SatisfyAll(
		HaveField("Context", "stackyard/staging"), HaveField("State", "success"))), func() string {
		done := &promotionv1alpha1.Promotion{}
		_ = env.Client.Get(ctx, client.ObjectKeyFromObject(p), done)
		return fmt.Sprintf("promotion %s: %s", done.Status.Phase, done.Status.Message)
	})
	g.Expect(messages()).To(HaveLen(1), "the approval was asked for once")
}

// actAs returns a stackyard CLI client acting as user, granted rules in ns.
func actAs(t *testing.T, ns, user string, rules ...rbacv1.PolicyRule) *pipelinectl.Client {
	t.Helper()
	cfg, err := env.Impersonate(context.Background(), ns, user, nil, rules...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pipelinectl.New(cfg, ns)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rule grants verbs on a resource of the promotion API.
func rule(resource string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{promotionv1alpha1.GroupVersion.Group}, Resources: []string{resource}, Verbs: verbs}
}
