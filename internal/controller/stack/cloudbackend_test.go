package stack_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/test/testenv"
)

// TestCloudBackendAccessToken points a Stack at a Pulumi Cloud style
// backend (an https?:// service URL) with its access token in the Secret
// accessTokenSecret names. Pulumi Cloud cannot be reached from here, so the
// service is a loopback server that only records what the real pulumi CLI
// sends and answers nothing useful: the test shows the token reaches the
// service as the CLI's credentials, and never the Stack's status or events,
// not that a deployment through Pulumi Cloud works.
func TestCloudBackendAccessToken(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	const token = "pul-0123456789abcdef-stackyard"
	neverLogged(token)

	var mu sync.Mutex
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("Authorization")] = true
		mu.Unlock()
		http.Error(w, `{"code":503,"message":"not a real Pulumi Cloud"}`, http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)

	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "pulumi", Namespace: ns},
		StringData: map[string]string{"accessToken": token},
	})).To(Succeed())
	s := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "cloud", Namespace: ns},
		Spec: shared.StackSpec{
			Stack:             "org/cloud/dev",
			Backend:           srv.URL,
			AccessTokenSecret: "pulumi",
			GitSource:         programSource(t, "cloud", fileProgram("cloud", filepath.Join(testenv.LiveDir(t), "page.txt"), "x", 0)),
		},
	}
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())

	g.Eventually(func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["token "+token]
	}, opTimeout, 250*time.Millisecond).Should(BeTrue(), "the service never saw the access token")
	got := getStack(g, ns, "cloud")
	g.Expect(describe(got)).NotTo(ContainSubstring(token))
	var events corev1.EventList
	g.Expect(env.Client.List(ctx, &events)).To(Succeed())
	for _, e := range events.Items {
		g.Expect(e.Message).NotTo(ContainSubstring(token))
	}
	g.Expect(env.Client.Delete(ctx, got)).To(Succeed())
}
