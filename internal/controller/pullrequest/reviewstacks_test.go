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
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/test/forge"
	"github.com/stackyard/stackyard/test/testenv"
)

// reviewProject writes content to a file named after the stack in the
// directory its config key web:path names, and outputs the address a
// review environment of that stack would have.
func reviewProject(content string) string {
	return fmt.Sprintf("name: web\nruntime: yaml\nconfig:\n  path:\n    type: string\nresources:\n  page:\n    type: stackyardtest:index:File\n"+
		"    properties:\n      path: ${path}/${pulumi.stack}.txt\n      content: %s\noutputs:\n  url: https://${pulumi.stack}.review.example.com\n", content)
}

// pushReview pushes reviewProject(content) on branch, and returns the
// commit.
func (f *fixture) pushReview(branch, content string) string {
	return f.pushProgram(branch, reviewProject(content))
}

// editPipeline changes the fixture's Pipeline, retried on a conflict.
func (f *fixture) editPipeline(t *testing.T, edit func(*promotionv1alpha1.Pipeline)) {
	t.Helper()
	NewWithT(t).Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &promotionv1alpha1.Pipeline{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: "web"}, p); err != nil {
			return err
		}
		edit(p)
		return env.Client.Update(context.Background(), p)
	})).To(Succeed())
}

// reviewComment is the review-stack comment of pull request number: there
// is one, edited from push to push.
func (f *fixture) reviewComment(g Gomega, number int64) forge.Comment {
	comments, err := f.gitea.Comments("web", number)
	g.Expect(err).NotTo(HaveOccurred())
	var found []forge.Comment
	for _, c := range comments {
		if strings.Contains(c.Body, "<!-- stackyard:review-stack "+f.ns+"/web -->") {
			found = append(found, c)
		}
	}
	g.Expect(found).To(HaveLen(1), "one review-stack comment")
	return found[0]
}

// TestReviewStacks: a pull request gets a review stack of its own, made
// from the Pipeline's template at its head, whose outputs are commented on
// the pull request; a push moves it and edits the comment. Over the limit
// a second pull request waits, saying so, and gets its stack once the
// first closes, which destroys the first stack's resources and removes it
// from its backend. A ttl that runs out while the pull request is open
// destroys the stack too, and the comment says so. Gitea's webhooks drive
// every step.
func TestReviewStacks(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newFixture(t)
	dir := testenv.LiveDir(t)
	state := filepath.Join(dir, "state")
	g.Expect(os.MkdirAll(state, 0o755)).To(Succeed())
	f.editPipeline(t, func(p *promotionv1alpha1.Pipeline) {
		p.Spec.PullRequests.ReviewStacks = &promotionv1alpha1.ReviewStacks{MaxStacks: 1, Template: shared.StackSpec{
			Stack: "review", Backend: "file://" + state,
			Config: map[string]apiextensionsv1.JSON{"web:path": {Raw: fmt.Appendf(nil, "%q", dir)}},
		}}
	})
	page := func(number int64) string {
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("review-pr-%d.txt", number)))
		return string(b)
	}
	inBackend := func(number int64) bool {
		_, err := os.Stat(filepath.Join(state, ".pulumi", "stacks", "web", fmt.Sprintf("review-pr-%d.json", number)))
		return err == nil
	}

	// Opened: deployed at its head, its outputs commented.
	head := f.pushReview("feature", "v2")
	first := f.gitea.OpenPullRequest("web", "feature", "main", "v2 of the page")
	g.Eventually(func(g Gomega) {
		c := f.reviewComment(g, first)
		g.Expect(c.Body).To(ContainSubstring("### stackyard review stack `" + change.ReviewStackName("web", first) + "`"))
		g.Expect(c.Body).To(ContainSubstring("**Ready**: deployed at " + change.ShortCommit(head)))
		g.Expect(c.Body).To(ContainSubstring(fmt.Sprintf("| `url` | `\"https://review-pr-%d.review.example.com\"` |", first)))
		g.Expect(c.Body).To(ContainSubstring(fmt.Sprintf("(%s/stacks/%s/%s)", dashboardURL, f.ns, change.ReviewStackName("web", first))))
	}, opTimeout, poll).Should(Succeed(), func() string { return logs.String() })
	g.Expect(page(first)).To(Equal("v2"))
	stack := &pulumiv1.Stack{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: change.ReviewStackName("web", first)}, stack)).To(Succeed())
	g.Expect(stack.Spec.Commit).To(Equal(head))
	g.Expect(stack.Spec.Stack).To(Equal(fmt.Sprintf("review-pr-%d", first)))
	g.Expect(metav1.GetControllerOf(stack)).To(HaveValue(HaveField("Kind", "Pipeline")))
	g.Expect(stack.Annotations).NotTo(HaveKey(promotionv1alpha1.AuthorizedStageAnnotation))
	commentID := f.reviewComment(g, first).ID

	// A push: the stack moves to the new head, the same comment edited.
	head2 := f.pushReview("feature", "v3")
	g.Eventually(func(g Gomega) {
		c := f.reviewComment(g, first)
		g.Expect(c.ID).To(Equal(commentID))
		g.Expect(c.Body).To(ContainSubstring("**Ready**: deployed at " + change.ShortCommit(head2)))
	}, opTimeout, poll).Should(Succeed(), func() string { return logs.String() })
	g.Expect(page(first)).To(Equal("v3"))

	// A second pull request, over the limit of one: it waits, and says so.
	f.pushReview("other", "v4")
	second := f.gitea.OpenPullRequest("web", "other", "main", "another page")
	g.Eventually(func(g Gomega) {
		g.Expect(f.reviewComment(g, second).Body).To(ContainSubstring(
			"**Waiting**: waiting: 1 review stacks exist, the most spec.pullRequests.reviewStacks.maxStacks allows"))
	}, opTimeout, poll).Should(Succeed())
	// The status is patched at the end of the reconcile that posts.
	g.Eventually(func(g Gomega) *promotionv1alpha1.ReviewStackStatus {
		pr := f.pullRequest(g, second)
		g.Expect(pr).NotTo(BeNil())
		return pr.ReviewStack
	}, 30*time.Second, poll).Should(HaveValue(HaveField("Phase", promotionv1alpha1.ReviewStackWaiting)))
	g.Expect(page(second)).To(BeEmpty())

	// The first closes: its stack's resources are destroyed and the stack
	// leaves its backend; the second gets its turn.
	g.Expect(inBackend(first)).To(BeTrue(), "the review stack is not where the test looks for it")
	f.gitea.ClosePullRequest("web", first)
	// Never two at once: the first counts until it is destroyed.
	g.Eventually(func(g Gomega) {
		var stacks pulumiv1.StackList
		g.Expect(env.Client.List(ctx, &stacks, client.InNamespace(f.ns), client.MatchingLabels{promotionv1alpha1.PipelineLabel: "web"})).To(Succeed())
		if len(stacks.Items) > 1 {
			t.Errorf("%d review stacks at once, with maxStacks 1", len(stacks.Items))
		}
		gone := &pulumiv1.Stack{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: change.ReviewStackName("web", first)}, gone)
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(err).To(HaveOccurred(), "the closed pull request's review stack is still there")
		g.Expect(f.reviewComment(g, second).Body).To(ContainSubstring("**Ready**"))
	}, opTimeout, poll).Should(Succeed(), func() string { return logs.String() })
	g.Expect(f.reviewComment(g, first).Body).To(ContainSubstring("**Destroyed**: the pull request closed"))
	g.Expect(page(first)).To(BeEmpty(), "the closed pull request's resources were not destroyed")
	g.Expect(inBackend(first)).To(BeFalse(), "the closed pull request's stack is still in its backend")
	g.Expect(page(second)).To(Equal("v4"))

	// A ttl that has run out destroys the open pull request's stack; the
	// comment says so, and nothing makes it again until a push.
	f.editPipeline(t, func(p *promotionv1alpha1.Pipeline) {
		p.Spec.PullRequests.ReviewStacks.Template.TTL = &metav1.Duration{Duration: time.Second}
	})
	g.Eventually(func(g Gomega) {
		g.Expect(f.reviewComment(g, second).Body).To(ContainSubstring("**Expired**: its ttl ran out at"))
	}, opTimeout, poll).Should(Succeed(), func() string { return logs.String() })
	g.Eventually(func() string { return page(second) }, opTimeout, poll).Should(BeEmpty())
	gone := func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: change.ReviewStackName("web", second)}, &pulumiv1.Stack{})
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(err).To(HaveOccurred(), "the expired review stack is there")
	}
	g.Eventually(gone, opTimeout, poll).Should(Succeed())
	g.Consistently(gone, 3*time.Second, poll).Should(Succeed(), "the expired review stack was made again without a push")
}
