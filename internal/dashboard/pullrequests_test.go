package dashboard_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// TestPullRequestsOnPipelinePage: the pipeline page lists the open pull
// requests its status records, with each preview and review stack, the
// time a review stack has left and its outputs (a secret one masked).
// Outputs come only from the Stack whose UID the Pipeline recorded (and
// only to a reader who may list Stacks: pullRequests).
func TestPullRequestsOnPipelinePage(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	review := stack(nsA, "web-pr-7")
	g.Expect(env.Client.Create(ctx, review)).To(Succeed())
	markReady(g, ctx, nsA, "web-pr-7")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(review), review)).To(Succeed())
	// site-dev is a Stack the Pipeline did not make: a status naming it
	// under another UID shows none of its outputs.
	markReady(g, ctx, nsA, "site-dev")

	expires := metav1.NewTime(time.Now().Add(5 * time.Hour).Truncate(time.Second))
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &promotionv1alpha1.Pipeline{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "web"}, p); err != nil {
			return err
		}
		p.Status.PullRequests = &promotionv1alpha1.PullRequestPreviewsStatus{PullRequests: []promotionv1alpha1.PullRequestStatus{
			{Number: 7, Head: shaNew, Phase: promotionv1alpha1.PullRequestPreviewed, Message: "site-dev: 1 to update",
				ReviewStack: &promotionv1alpha1.ReviewStackStatus{Name: "web-pr-7", UID: review.UID, Head: shaNew,
					Phase: promotionv1alpha1.ReviewStackReady, Message: "deployed at bbbbbbb", ExpiresAt: &expires}},
			{Number: 8, Head: shaOld, Phase: promotionv1alpha1.PullRequestPreviewing,
				ReviewStack: &promotionv1alpha1.ReviewStackStatus{Name: "web-pr-8", Phase: promotionv1alpha1.ReviewStackWaiting,
					Message: "waiting: 1 review stacks exist"}},
			{Number: 9, Head: shaOld, Phase: promotionv1alpha1.PullRequestPreviewed,
				ReviewStack: &promotionv1alpha1.ReviewStackStatus{Name: "site-dev", UID: "not-the-stacks-uid", Phase: promotionv1alpha1.ReviewStackReady}},
		}}
		return env.Client.Status().Update(ctx, p)
	})).To(Succeed())

	var body string
	g.Eventually(func(g Gomega) {
		var code int
		code, body, _ = get(t, baseURL, "/pipelines/"+nsA+"/web", tokens["bob"])
		g.Expect(code).To(Equal(http.StatusOK), body)
		g.Expect(body).To(ContainSubstring(`data-pull-request="9"`))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect(body).To(MatchRegexp(`(?s)data-pull-request="7".*?Previewed.*?site-dev: 1 to update.*?` +
		`<a href="/stacks/` + nsA + `/web-pr-7">web-pr-7</a>: <span class="review-phase">Ready</span>.*?deployed at bbbbbbb.*?` +
		`datetime="` + expires.UTC().Format(time.RFC3339) + `">4h5\dm left<.*?<dt>password</dt><dd><code>&#34;\[secret\]&#34;</code>.*?<dt>url</dt><dd><code>&#34;https://site.example&#34;</code>`))
	g.Expect(body).To(MatchRegexp(`(?s)data-pull-request="8".*?web-pr-8: <span class="review-phase">Waiting</span> <small>waiting: 1 review stacks exist</small>`))
	g.Expect(body).To(MatchRegexp(`(?s)data-pull-request="9".*?<td class="review">site-dev: <span class="review-phase">Ready</span>\s*</td>`),
		"a Stack the Pipeline did not make is shown as its review stack")

}
