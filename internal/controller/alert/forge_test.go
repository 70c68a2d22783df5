package alert_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/test/forge"
	"github.com/stackyard/stackyard/test/gitserver"
)

// TestGiteaCommitStatuses sets commit statuses on a real forge: a release
// of a Gitea repository promoted into staging (succeeded) and prod
// (waiting for approval) shows on its commit in Gitea as one status per
// stage, read back through Gitea's own API.
func TestGiteaCommitStatuses(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.NewNamespace(t, "alert-gitea-")
	gitea := forge.StartGitea(t)
	repoURL := gitea.CreateRepo("web")
	local := gitserver.New(t).CreateRepo("web")
	commit := local.Commit("main", map[string]string{"Pulumi.yaml": "name: web\nruntime: yaml\n"})
	local.Git("push", gitea.PushURL("web"), "main")
	gitea.WaitBranch("web", "main", commit)

	p := &promotionv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}
	p.Spec.Git = promotionv1alpha1.GitSubscription{RepoURL: repoURL, Branch: "main"}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &promotionv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "web-r1", Namespace: ns},
		Spec: promotionv1alpha1.ReleaseSpec{Pipeline: "web", Commit: promotionv1alpha1.ReleaseCommit{SHA: commit, Subject: "commit 1"}}})).To(Succeed())
	provider(t, ns, "gitea", notificationv1alpha1.ProviderGitea, gitea.URL+"/api/v1", map[string]string{"token": gitea.Token})
	newAlert(t, ns, "status", "gitea", notificationv1alpha1.EventPromotionAwaitingApproval, notificationv1alpha1.EventPromotionSucceeded)

	now := metav1.Now()
	for stage, st := range map[string]promotionv1alpha1.PromotionStatus{
		"staging": {Phase: promotionv1alpha1.PromotionSucceeded, Message: "1 stack updated", Commit: commit, StartTime: &now, EndTime: &now},
		"prod":    {Phase: promotionv1alpha1.PromotionPending, Reason: promotionv1alpha1.PromotionReasonAwaitingApproval, Message: "waiting for approval: 0 of 1", Commit: commit},
	} {
		pr := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: "web-r1-" + stage, Namespace: ns},
			Spec: promotionv1alpha1.PromotionSpec{Stage: stage, Release: "web-r1"}}
		g.Expect(env.Client.Create(ctx, pr)).To(Succeed())
		pr.Status = st
		g.Expect(env.Client.Status().Update(ctx, pr)).To(Succeed())
	}
	g.Eventually(func() ([]forge.CommitStatus, error) { return gitea.Statuses("web", commit) }, timeout, poll).Should(ConsistOf(
		SatisfyAll(HaveField("Context", "stackyard/staging"), HaveField("State", "success"),
			HaveField("Description", "Promotion of web-r1 into staging succeeded: 1 stack updated"),
			HaveField("TargetURL", dashboardURL+"/promotions/"+ns+"/web-r1-staging")),
		SatisfyAll(HaveField("Context", "stackyard/prod"), HaveField("State", "pending"),
			HaveField("TargetURL", dashboardURL+"/promotions/"+ns+"/web-r1-prod")),
	))
}
