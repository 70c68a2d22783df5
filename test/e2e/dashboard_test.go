package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/devenv"
	"github.com/stackyard/stackyard/test/browser"
	"github.com/stackyard/stackyard/test/testenv"
)

// TestDevDashboard is the dashboard's acceptance test: a fresh `stackyard
// dev` brings its sample pipeline to "waiting for approval at prod" by
// itself, and in Chromium (test/browser/dev-dashboard.spec.mjs) a new
// commit appears live, a user without the verb "approve" is refused, and an
// approval clicked in the page moves the release to prod. The screenshots
// are kept in test/browser/artifacts/dev-dashboard.
func TestDevDashboard(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tmp, bin := prepare(t)
	stateDir := filepath.Join(tmp, "state")
	run := startDev(t, bin, stateDir)
	defer run.stop(t)
	c := devClient(t, stateDir, clientgoscheme.AddToScheme, pulumiv1.AddToScheme, promotionv1alpha1.AddToScheme)

	// On its own, the sample pipeline takes the first release to
	// sample-dev and asks for an approval at sample-prod.
	g.Eventually(func(g Gomega) {
		var list promotionv1alpha1.PromotionList
		g.Expect(c.List(ctx, &list, client.InNamespace("default"), client.MatchingLabels{promotionv1alpha1.StageLabel: devenv.SampleProd})).To(Succeed())
		g.Expect(list.Items).To(ContainElement(Satisfy(func(p promotionv1alpha1.Promotion) bool {
			return p.Status.Phase == promotionv1alpha1.PromotionPending && p.Status.PlanDigest != ""
		})))
	}, 5*time.Minute, time.Second).Should(Succeed(), func() string { return run.output.String() })

	m := dashboardLine.FindStringSubmatch(run.output.String())
	g.Expect(m).NotTo(BeNil(), run.output.String())
	token, err := os.ReadFile(m[2])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(run.output.String()).To(ContainSubstring("login token:  " + strings.TrimSpace(string(token))))

	hooks := http.NewServeMux()
	hooks.HandleFunc("POST /commit", func(w http.ResponseWriter, _ *http.Request) {
		sha, err := commitToSample(ctx, c, filepath.Join(stateDir, "git", devenv.SampleName))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte(sha))
	})
	hookServer := httptest.NewServer(hooks)
	defer hookServer.Close()

	artifacts := filepath.Join(testenv.RepoRoot(), "test", "browser", "artifacts", "dev-dashboard")
	g.Expect(os.RemoveAll(artifacts)).To(Succeed())
	g.Expect(os.MkdirAll(artifacts, 0o755)).To(Succeed())
	browser.Run(t, "dev-dashboard.spec.mjs", map[string]string{
		"BASE_URL": m[1], "TOKEN": strings.TrimSpace(string(token)), "VIEWER_TOKEN": viewerToken(t, c),
		"HOOK_URL": hookServer.URL, "SCREENSHOT_DIR": artifacts,
	})

	// The approval is on record as the developer's admin, and nobody else's.
	var approvals promotionv1alpha1.ApprovalList
	g.Expect(c.List(ctx, &approvals, client.InNamespace("default"))).To(Succeed())
	g.Expect(approvals.Items).To(HaveLen(1))
	g.Expect(approvals.Items[0].Spec.User).To(Equal("system:serviceaccount:default:" + devenv.DashboardAdmin))
}

// viewerToken makes a ServiceAccount that may read the pipeline and create
// Approvals, but lacks the verb "approve", and returns a token for it.
func viewerToken(t *testing.T, c client.Client) string {
	t.Helper()
	token, err := testenv.UserToken(context.Background(), c, "default", "viewer",
		rbacv1.PolicyRule{APIGroups: []string{"promotion.stackyard.dev"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{"promotion.stackyard.dev"}, Resources: []string{"approvals"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"pulumi.com"}, Resources: []string{"stacks"}, Verbs: []string{"get", "list", "watch"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// commitToSample commits a change of the sample program's message and asks
// the sample pipeline to look for it now; it returns the commit's SHA.
func commitToSample(ctx context.Context, c client.Client, repo string) (string, error) {
	gitCmd := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=Dana Dev", "GIT_AUTHOR_EMAIL=dana@example.com",
			"GIT_COMMITTER_NAME=Dana Dev", "GIT_COMMITTER_EMAIL=dana@example.com")
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	program := filepath.Join(repo, "Pulumi.yaml")
	data, err := os.ReadFile(program)
	if err != nil {
		return "", err
	}
	changed := strings.Replace(string(data), "default: hello from stackyard", "default: hello again from stackyard", 1)
	if err := os.WriteFile(program, []byte(changed), 0o644); err != nil {
		return "", err
	}
	if out, err := gitCmd("commit", "-qam", "A warmer greeting"); err != nil {
		return "", fmt.Errorf("git commit: %v: %s", err, out)
	}
	sha, err := gitCmd("rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	p := &promotionv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: devenv.SamplePipeline}}
	patch := []byte(`{"metadata":{"annotations":{"` + shared.ReconcileRequestAnnotation + `":"` + sha + `"}}}`)
	return sha, c.Patch(ctx, p, client.RawPatch("application/merge-patch+json", patch))
}
