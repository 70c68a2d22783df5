package pullrequest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/controller/pullrequest"
	"github.com/stackyard/stackyard/test/forge"
	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/testenv"
)

const (
	// opTimeout bounds a wait that includes a Pulumi operation: a guard
	// against a hang, not a measurement.
	opTimeout = 3 * time.Minute
	poll      = 200 * time.Millisecond
	// dashboardURL is the dashboard the operator links to.
	dashboardURL = "https://stackyard.example.com"
)

// project writes content to the file its config key web:path names.
func project(content string) string {
	return fmt.Sprintf("name: web\nruntime: yaml\nconfig:\n  path:\n    type: string\nresources:\n  page:\n    type: stackyardtest:index:File\n    properties:\n      path: ${path}\n      content: %s\n", content)
}

// fixture is a Gitea repository "web" whose main is deployed by the Stack
// web-staging of stage staging, and a Pipeline "web" that previews its
// pull requests against that stage.
type fixture struct {
	ns     string
	gitea  *forge.Gitea
	local  *gitserver.Repo
	target string
}

func newFixture(t *testing.T) *fixture {
	g := NewWithT(t)
	ctx := context.Background()
	f := &fixture{ns: env.NewNamespace(t, "pullrequest-"), gitea: forge.StartGitea(t)}
	repoURL := f.gitea.CreateRepo("web")
	f.local = gitserver.New(t).CreateRepo("web")
	main := f.push("main", "v1")

	dir := testenv.LiveDir(t)
	g.Expect(os.MkdirAll(filepath.Join(dir, "state"), 0o755)).To(Succeed())
	f.target = filepath.Join(dir, "page.txt")
	g.Expect(env.Client.Create(ctx, &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "web-staging", Namespace: f.ns, Annotations: map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: "staging"}},
		Spec: shared.StackSpec{
			Stack: "staging", Backend: "file://" + filepath.Join(dir, "state"),
			Config:    map[string]apiextensionsv1.JSON{"web:path": {Raw: fmt.Appendf(nil, "%q", f.target)}},
			GitSource: &shared.GitSource{ProjectRepo: repoURL, Commit: main},
		},
	})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &promotionv1alpha1.Stage{
		ObjectMeta: metav1.ObjectMeta{Name: "staging", Namespace: f.ns},
		Spec: promotionv1alpha1.StageSpec{Pipeline: "web", Stacks: []promotionv1alpha1.StackBinding{{Name: "web-staging"}},
			Sources: promotionv1alpha1.ReleaseSources{Direct: true}},
	})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "forge", Namespace: f.ns},
		StringData: map[string]string{promotionv1alpha1.ForgeTokenKey: f.gitea.Token}})).To(Succeed())
	p := &promotionv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns}}
	p.Spec.Git = promotionv1alpha1.GitSubscription{RepoURL: repoURL, Branch: "main"}
	p.Spec.PullRequests = &promotionv1alpha1.PullRequestPreviews{
		Forge: promotionv1alpha1.ForgeGitea, APIURL: f.gitea.URL + "/api/v1", SecretRef: corev1.LocalObjectReference{Name: "forge"},
		Stages: []string{"staging"}, Interval: &metav1.Duration{Duration: time.Hour},
	}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())

	// Gitea tells the operator of its pull requests, through a Receiver;
	// nothing else wakes the Pipeline within the test.
	const token = "receiver-token-of-the-pull-request-suite"
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: f.ns},
		StringData: map[string]string{notificationv1alpha1.ReceiverTokenKey: token}})).To(Succeed())
	rcv := &notificationv1alpha1.Receiver{ObjectMeta: metav1.ObjectMeta{Name: "gitea", Namespace: f.ns},
		Spec: notificationv1alpha1.ReceiverSpec{Type: notificationv1alpha1.ReceiverGitea, SecretRef: notificationv1alpha1.SecretReference{Name: "hook"}}}
	g.Expect(env.Client.Create(ctx, rcv)).To(Succeed())
	g.Eventually(func(g Gomega) string {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(rcv), rcv)).To(Succeed())
		return rcv.Status.WebhookPath
	}, 30*time.Second, poll).ShouldNot(BeEmpty())
	g.Expect(testenv.AwaitWebhook(receiverURL+rcv.Status.WebhookPath, 10*time.Second)).To(Succeed())
	f.gitea.AddWebhook("web", receiverURL+rcv.Status.WebhookPath, token, "pull_request", "pull_request_sync")

	g.Eventually(f.page, opTimeout, poll).Should(Equal("v1"))
	return f
}

// push commits project(content) on branch of the local repository and
// pushes it to Gitea, and returns the commit.
func (f *fixture) push(branch, content string) string { return f.pushProgram(branch, project(content)) }

// pushProgram commits program as Pulumi.yaml on branch and pushes it to
// Gitea, and returns the commit.
func (f *fixture) pushProgram(branch, program string) string {
	sha := f.local.Commit(branch, map[string]string{"Pulumi.yaml": program})
	f.local.Git("push", "--force", f.gitea.PushURL("web"), branch)
	f.gitea.WaitBranch("web", branch, sha)
	return sha
}

// editStage changes the spec of the fixture's Stage name. The operator
// writes the Stage's status meanwhile, so the change is retried on a
// conflict.
func (f *fixture) editStage(t *testing.T, name string, edit func(*promotionv1alpha1.Stage)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		stage := &promotionv1alpha1.Stage{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, stage); err != nil {
			return err
		}
		edit(stage)
		return env.Client.Update(context.Background(), stage)
	})
	if err != nil {
		t.Fatalf("changing Stage %s: %v", name, err)
	}
}

// page is what the Stack's program wrote.
func (f *fixture) page() string {
	b, _ := os.ReadFile(f.target)
	return string(b)
}

// pullRequest is the Pipeline's status of pull request number.
func (f *fixture) pullRequest(g Gomega, number int64) *promotionv1alpha1.PullRequestStatus {
	p := &promotionv1alpha1.Pipeline{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "web"}, p)).To(Succeed())
	if p.Status.PullRequests == nil {
		return nil
	}
	for _, pr := range p.Status.PullRequests.PullRequests {
		if pr.Number == number {
			return &pr
		}
	}
	return nil
}

// previews lists the names of the Workspaces and Updates that preview
// pull request number.
func (f *fixture) previews(g Gomega, number int64) []string {
	var names []string
	sel := client.MatchingLabels{pullrequest.PullRequestLabel: fmt.Sprint(number)}
	var wss autov1alpha1.WorkspaceList
	g.Expect(env.Client.List(context.Background(), &wss, client.InNamespace(f.ns), sel)).To(Succeed())
	for _, ws := range wss.Items {
		names = append(names, "Workspace "+ws.Name)
	}
	var upds autov1alpha1.UpdateList
	g.Expect(env.Client.List(context.Background(), &upds, client.InNamespace(f.ns), sel)).To(Succeed())
	for _, u := range upds.Items {
		names = append(names, "Update "+u.Name)
	}
	return names
}

// TestPullRequestPreviews opens a pull request in Gitea, whose webhook
// tells the operator: its head is previewed against the staging Stack,
// with nothing deployed, and one comment and a commit status say what it
// would change. A new push previews again and edits the same comment.
// Closing the pull request deletes its previews. The Pipeline polls once
// an hour: every step is driven by Gitea's events.
func TestPullRequestPreviews(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t)
	f.editStage(t, "staging", func(stage *promotionv1alpha1.Stage) {
		stage.Spec.Policies = []promotionv1alpha1.PolicyRule{
			{Name: "no-deletes", Expression: "counts.delete > 0", Action: promotionv1alpha1.PolicyRefuse},
			{Name: "page-frozen", Expression: `changes.exists(c, c.op == "update" && "content" in c.properties)`,
				Action: promotionv1alpha1.PolicyRefuse, Message: "the page is frozen"},
		}
	})
	head := f.push("feature", "v2")
	number := f.gitea.OpenPullRequest("web", "feature", "main", "v2 of the page")

	comment := func(g Gomega) forge.Comment {
		comments, err := f.gitea.Comments("web", number)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(comments).To(HaveLen(1), "one comment, edited from push to push")
		return comments[0]
	}
	g.Eventually(func(g Gomega) {
		c := comment(g)
		g.Expect(c.Body).To(ContainSubstring("<!-- stackyard:pull-request-preview " + f.ns + "/web -->"))
		g.Expect(c.Body).To(ContainSubstring("stackyard preview of `" + head[:7] + "`"))
		g.Expect(c.Body).To(ContainSubstring("| staging | web-staging | 1 to update, 1 unchanged |"))
		g.Expect(c.Body).To(ContainSubstring("~ update stackyardtest:index:File page\n    ~ content: \"v1\" => \"v2\"\n"))
		g.Expect(c.Body).To(ContainSubstring("- stage staging, policy no-deletes: passes\n"))
		g.Expect(c.Body).To(ContainSubstring("- stage staging, policy page-frozen: **would refuse** the promotion: the page is frozen\n"))
	}, opTimeout, poll).Should(Succeed(), func() string { return logs.String() })
	first := comment(g).ID
	g.Eventually(func() ([]forge.CommitStatus, error) { return f.gitea.Statuses("web", head) }, 30*time.Second, poll).Should(ContainElement(SatisfyAll(
		HaveField("Context", "stackyard/preview/web"), HaveField("State", "success"), HaveField("Description", "web-staging: 1 to update, 1 unchanged"))))
	// The status is patched at the end of the reconcile that posts.
	g.Eventually(func(g Gomega) {
		pr := f.pullRequest(g, number)
		g.Expect(pr).NotTo(BeNil())
		g.Expect(pr.Phase).To(Equal(promotionv1alpha1.PullRequestPreviewed))
		g.Expect(pr.Posted).To(Equal(head))
		g.Expect(pr.Stacks).To(ConsistOf(SatisfyAll(HaveField("Stack", "web-staging"), HaveField("Summary.Update", int32(1)))))
	}, 30*time.Second, poll).Should(Succeed())
	g.Expect(f.page()).To(Equal("v1"), "a preview changed the Stack")

	// A new push: previewed again, the same comment edited.
	head2 := f.push("feature", "v3")
	g.Eventually(func(g Gomega) {
		c := comment(g)
		g.Expect(c.ID).To(Equal(first))
		g.Expect(c.Body).To(ContainSubstring("stackyard preview of `" + head2[:7] + "`"))
	}, opTimeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) []string { return f.previews(g, number) }, 30*time.Second, poll).ShouldNot(ContainElement(ContainSubstring(head[:7])),
		"the previews of the old head stay")

	// Closed: its previews go.
	f.gitea.ClosePullRequest("web", number)
	g.Eventually(func(g Gomega) []string { return f.previews(g, number) }, 30*time.Second, poll).Should(BeEmpty())
	g.Eventually(func(g Gomega) *promotionv1alpha1.PullRequestStatus { return f.pullRequest(g, number) }, 30*time.Second, poll).Should(BeNil())
	g.Expect(f.page()).To(Equal("v1"))
}

// TestForkPullRequest: a pull request from a fork is not previewed (no
// Workspace gets the Stacks' secrets) nor given a review stack (none gets
// the template's), and its comment says why.
func TestForkPullRequest(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t)
	f.editPipeline(t, func(p *promotionv1alpha1.Pipeline) {
		p.Spec.PullRequests.ReviewStacks = &promotionv1alpha1.ReviewStacks{Template: shared.StackSpec{Stack: "review"}}
	})
	contributor := f.gitea.CreateUser("contributor")
	contributor.Fork("web")
	sha := f.local.Commit("evil", map[string]string{"Pulumi.yaml": project("pwned")})
	f.local.Git("push", contributor.PushURL("web"), "evil")
	number := contributor.OpenPullRequest("web", "contributor:evil", "main", "a harmless change")

	g.Eventually(func(g Gomega) {
		comments, err := f.gitea.Comments("web", number)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(comments).To(ConsistOf(HaveField("Body", ContainSubstring("not previewed: the pull request comes from a fork"))))
	}, 30*time.Second, poll).Should(Succeed())
	g.Eventually(func(g Gomega) *promotionv1alpha1.PullRequestStatus { return f.pullRequest(g, number) }, 30*time.Second, poll).Should(
		HaveValue(SatisfyAll(HaveField("Phase", promotionv1alpha1.PullRequestSkipped), HaveField("Fork", true), HaveField("Head", sha))))
	g.Consistently(func(g Gomega) []string { return f.previews(g, number) }, 3*time.Second, poll).Should(BeEmpty(),
		"a fork's pull request was given a Workspace with the Stacks' secrets")
	var stacks pulumiv1.StackList
	g.Expect(env.Client.List(context.Background(), &stacks, client.InNamespace(f.ns), client.MatchingLabels{promotionv1alpha1.PipelineLabel: "web"})).To(Succeed())
	g.Expect(stacks.Items).To(BeEmpty(), "a fork's pull request was given a review stack")
	g.Expect(f.pullRequest(g, number).ReviewStack).To(BeNil())
	statuses, err := f.gitea.Statuses("web", sha)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(statuses).To(BeEmpty())
	g.Expect(strings.Contains(logs.String(), "pwned")).To(BeFalse())
}
