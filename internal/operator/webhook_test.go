package operator_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/editstamp"
	"github.com/stackyard/stackyard/internal/operator"
	"github.com/stackyard/stackyard/internal/readcheck"
	"github.com/stackyard/stackyard/internal/servingcert"
	"github.com/stackyard/stackyard/test/testenv"
)

// TestWebhookServed runs the operator with its admission webhook, as the
// operator's ServiceAccount with the packaged roles only, against the
// webhook configuration config/webhook ships (pointed at the operator's
// loopback address, since no Service routes here, and with no caBundle):
// the operator makes its serving certificate and the Secret that keeps
// it, sets the CA in both configurations, stamps the author of a
// governed Stack's edit, a user authenticated by a bearer token, and
// refuses her edit naming a Secret she may not read. A second start reads
// the same certificate.
func TestWebhookServed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cfg, err := env.ServiceAccountConfig(ctx, "stackyard-system", "stackyard", testenv.OperatorRoles()...)
	g.Expect(err).NotTo(HaveOccurred())

	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "webhook", "edit-stamp.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	g.Expect(sigsyaml.UnmarshalStrict(data, mwc)).To(Succeed())
	addr := freeAddr(t)
	host, _, _ := net.SplitHostPort(addr)
	for i := range mwc.Webhooks {
		mwc.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://" + addr + editstamp.Path)}
	}
	g.Expect(env.Client.Create(ctx, mwc)).To(Succeed())
	data, err = os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "webhook", "read-check.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g.Expect(sigsyaml.UnmarshalStrict(data, vwc)).To(Succeed())
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://" + addr + readcheck.Path)}
	}
	g.Expect(env.Client.Create(ctx, vwc)).To(Succeed())
	// Without their server, the webhooks fail governed writes closed:
	// gone with the test.
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), mwc)
		_ = env.Client.Delete(context.Background(), vwc)
	})

	secret := types.NamespacedName{Namespace: "stackyard-system", Name: "stackyard-webhook-tls"}
	webhook := operator.WebhookOptions{Addr: addr, Secret: secret, Hosts: []string{host}, Configuration: mwc.Name, ValidatingConfiguration: vwc.Name}
	startOperator(t, cfg, operator.Options{Webhook: webhook})

	// The CA is in the configuration and in the Secret.
	tls := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, secret, tls)).To(Succeed())
	ca := tls.Data[servingcert.CAKey]
	g.Expect(ca).NotTo(BeEmpty())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(mwc), mwc)).To(Succeed())
		g.Expect(mwc.Webhooks[0].ClientConfig.CABundle).To(Equal(ca))
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(vwc), vwc)).To(Succeed())
		g.Expect(vwc.Webhooks[0].ClientConfig.CABundle).To(Equal(ca))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())

	// A user's edit of a governed Stack is stamped with their name.
	ns := env.NewNamespace(t, "webhook-")
	alice, err := env.TokenClient(ctx, ns, "alice", rbacv1.PolicyRule{
		APIGroups: []string{pulumiv1.GroupVersion.Group}, Resources: []string{"stacks"}, Verbs: []string{"get", "create", "update", "patch"}})
	g.Expect(err).NotTo(HaveOccurred())
	stack := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod", Annotations: map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: "prod"}},
		Spec:       shared.StackSpec{Stack: "prod", GitSource: &shared.GitSource{ProjectRepo: "https://git.example.invalid/web.git", Commit: "0123456789abcdef0123456789abcdef01234567"}},
	}
	g.Eventually(func() error { return alice.Create(ctx, stack.DeepCopy()) }, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stack), stack)).To(Succeed())
	ed, ok, err := change.EditorOf(stack)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue(), "no known editor: %v", stack.Annotations)
	g.Expect(ed.Username).To(Equal("system:serviceaccount:" + ns + ":alice"))
	// Naming a Secret she may not read is refused, the operator asking the
	// authorizer with its own rights.
	g.Expect(alice.Patch(ctx, stack.DeepCopy(), client.RawPatch(types.MergePatchType,
		[]byte(`{"spec":{"envRefs":{"TOKEN":{"type":"Secret","secret":{"name":"prod-creds","key":"token"}}}}}`)))).
		To(MatchError(ContainSubstring(`may not read (the verb "get") Secret/prod-creds`)))

	// Another start finds the certificate and keeps it.
	again, err := servingcert.Ensure(ctx, env.Client, time.Now(), servingcert.Options{
		Secret: secret, Hosts: []string{host}, Dir: t.TempDir(), Configuration: mwc.Name})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(ca))
	// One that must also serve a new name keeps the CA, with a new
	// certificate.
	again, err = servingcert.Ensure(ctx, env.Client, time.Now(), servingcert.Options{
		Secret: secret, Hosts: []string{host, "stackyard-webhook.stackyard-system.svc"}, Dir: t.TempDir()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(ca))
	renewed := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, secret, renewed)).To(Succeed())
	g.Expect(renewed.Data[corev1.TLSCertKey]).NotTo(Equal(tls.Data[corev1.TLSCertKey]))
}
