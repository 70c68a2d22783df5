package dashboard_test

import (
	"context"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/valuediff"
)

// reviewSecret is the plaintext of the secret config value the reviewed
// preview changes. The engine masks it before it reaches the value diff;
// here it sits in the Stack's config Secret and in the plan Secret's saved
// plan, which the page must never show.
const reviewSecret = "hunter2-review-7f3a9"

// asUser is a client that acts with a user's token, as the dashboard's
// actions and the CLI do.
func asUser(t *testing.T, token string) client.Client {
	t.Helper()
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = token
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitingForReview creates, as alice, a promotion into stage in ns, and
// records on it what the Promotion controller records once its preview is
// done (recordReview). It returns the promotion's name.
func waitingForReview(t *testing.T, ns, stage string) string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	p := &promotionv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: stage + "-review-"},
		Spec: promotionv1alpha1.PromotionSpec{
			Stage: stage, Release: "web-bbbbbbb", RequestedBy: "system:serviceaccount:" + ns + ":alice", Reason: "review",
		},
	}
	g.Expect(asUser(t, tokens[ns+"/alice"]).Create(ctx, p)).To(Succeed())
	g.Expect(recordReview(ctx, p)).To(Succeed())
	g.Expect(env.Client.Status().Update(ctx, p)).To(Succeed())
	return p.Name
}

// recordReview creates the plan Secret of p's preview and its record (a
// StackPromotion), and sets, on p's status (the caller writes it), what
// the Promotion controller records
// once that preview is done and p waits for approval: a preview of
// site-<stage> whose plan Secret holds a value diff (a plain change, a
// changed secret, a replacement) and the code's patch, the commits the
// release brings, and a fired RequireApproval policy rule. The Stack's
// config Secret, and the saved plan, hold reviewSecret.
func recordReview(ctx context.Context, p *promotionv1alpha1.Promotion) error {
	ns, stage := p.Namespace, p.Spec.Stage
	urn := func(typ, name string) string { return "urn:pulumi:" + stage + "::web::" + typ + "::" + name }
	diff, err := valuediff.Encode(valuediff.Diff{Resources: []valuediff.Resource{
		{URN: urn("test:index:File", "page"), Type: "test:index:File", Op: "update", Properties: []valuediff.Property{
			{Path: "content", Kind: valuediff.KindUpdate, Old: `"<b>v1</b>"`, New: `"v2"`},
		}},
		{URN: urn("test:index:File", "secretPage"), Type: "test:index:File", Op: "update", Properties: []valuediff.Property{
			{Path: "content", Kind: valuediff.KindUpdate, Old: `"` + valuediff.Secret + `"`, New: `"` + valuediff.Secret + `"`},
		}},
		{URN: urn("test:index:Random", "id"), Type: "test:index:Random", Op: "replace", Properties: []valuediff.Property{
			{Path: "keepers.version", Kind: valuediff.KindUpdate, Old: `"v1"`, New: `"v2"`, Replaces: true},
			{Path: "keepers.note", Kind: valuediff.KindAdd, New: `"new"`},
		}},
	}})
	if err != nil {
		return err
	}
	plan := p.Name + "-plan"
	for _, sec := range []*corev1.Secret{{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: plan},
		Data: map[string][]byte{
			"plan":                           []byte(`{"config":{"web:token":"` + reviewSecret + `"}}`),
			autov1alpha1.DiffKey:             diff,
			promotionv1alpha1.SourcePatchKey: []byte(reviewPatch),
		},
	}, {
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, StringData: map[string]string{"password": reviewSecret},
	}} {
		if err := env.Client.Create(ctx, sec); client.IgnoreAlreadyExists(err) != nil {
			return err
		}
	}

	when := metav1.NewTime(time.Now().Add(-time.Hour))
	st := &p.Status
	st.Phase = promotionv1alpha1.PromotionPending
	st.Commit = shaNew
	st.PlanDigest = "sha256:" + strings.Repeat("d", 64)
	st.Message = "waiting for approval"
	st.Reason = promotionv1alpha1.PromotionReasonAwaitingApproval
	st.Policies = []promotionv1alpha1.PolicyResult{
		{Name: "no-replace", Fired: true, Action: promotionv1alpha1.PolicyRequireApproval, Message: "a resource is replaced",
			Required: 2, From: []promotionv1alpha1.Approver{{Group: "dba"}}},
		{Name: "quiet", Fired: false, Action: promotionv1alpha1.PolicyRefuse},
	}
	rec := change.NewStackPromotion(p, "site-"+stage)
	rec.Preview = &promotionv1alpha1.StackPreview{
		Name: "site-" + stage, Plan: plan,
		Summary: &promotionv1alpha1.ChangeSummary{Update: 2, Replace: 1, Same: 3},
		Changes: []promotionv1alpha1.ResourceChange{
			{URN: urn("test:index:File", "page"), Type: "test:index:File", Op: "update", Properties: []string{"content"}},
			{URN: urn("test:index:File", "secretPage"), Type: "test:index:File", Op: "update", Properties: []string{"content"}},
			{URN: urn("test:index:Random", "id"), Type: "test:index:Random", Op: "replace", Properties: []string{"keepers"}},
		},
		Source: &promotionv1alpha1.SourceChange{
			From: shaOld, To: shaNew, CommitCount: 5, PathCount: 1, Paths: []string{"web/Pulumi.yaml"},
			Commits: []promotionv1alpha1.CommitInfo{
				{SHA: strings.Repeat("e", 40), Subject: "faster <pages>", Author: "Dana Dev <dana@example.com>", Time: &when},
				{SHA: strings.Repeat("f", 40), Subject: "keep ids", Author: "Eli Ops <eli@example.com>", Time: &when},
			},
		},
	}
	st.Previewed = 1
	return client.IgnoreAlreadyExists(env.Client.Create(ctx, rec))
}

// reviewPatch is the code's diff recordReview stores with the plan.
const reviewPatch = `diff --git a/web/Pulumi.yaml b/web/Pulumi.yaml
--- a/web/Pulumi.yaml
+++ b/web/Pulumi.yaml
@@ -1,2 +1,2 @@
 name: web
-content: <b>v1</b>
+content: v2
`

// TestPromotionReview: the promotion page shows what approvers decide on,
// as `stackyard review` does: the value diffs (secrets masked) to those
// who may list the namespace's Stacks, property names and a note to those
// who may list promotions only; the commits and the code's diff; the
// fired policy rules, whose approvals make a stage without an approval
// policy decidable. No secret's plaintext reaches any page.
func TestPromotionReview(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "team-r"
	g.Expect(seed(ctx, ns)).To(Succeed())
	g.Expect(user(ctx, ns, "dave", rule("promotion.stackyard.dev", []string{"*"}, "get", "list", "watch"))).To(Succeed())
	name := waitingForReview(t, ns, "qa")
	path := "/promotions/" + ns + "/" + name

	// alice may list Stacks: the values, masked where secret.
	var page string
	g.Eventually(func(g Gomega) {
		var code int
		code, page, _ = get(t, baseURL, path, tokens[ns+"/alice"])
		g.Expect(code).To(Equal(http.StatusOK), page)
		g.Expect(page).To(ContainSubstring(`id="approve"`))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	text := html.UnescapeString(page)
	for _, want := range []string{
		"+0 create", "~2 update", "+-1 replace", "-0 delete",
		"~</span> update", "+-</span> replace",
		`content</code>: <code class="old">"<b>v1</b>"</code> → <code class="new">"v2"</code>`,
		`content</code>: <code class="old">"[secret]"</code> → <code class="new">"[secret]"</code>`,
		`keepers.version</code>: <code class="old">"v1"</code> → <code class="new">"v2"</code> <strong class="replaces">forces replacement</strong>`,
		`<span class="sign">+</span> <code class="path">keepers.note</code>: <code class="new">"new"</code>`,
		"brings 5 commit(s)", "eeeeeee</code> <span class=\"subject\">faster <pages></span> <small>Dana Dev <dana@example.com>",
		"… and 3 more", "<li><code>web/Pulumi.yaml</code></li>",
		`<span class="del">-content: <b>v1</b></span>`, `<span class="add">+content: v2</span>`,
		"no-replace", "a resource is replaced", "needs 2 approvals from group dba",
		"policy no-replace: 2 approvals from group dba", "The stage asks for 1 approval",
	} {
		g.Expect(text).To(ContainSubstring(want))
	}
	// Everything the status and the plan hold is escaped.
	g.Expect(page).NotTo(ContainSubstring("<b>v1</b>"))
	g.Expect(page).NotTo(ContainSubstring("<pages>"))
	g.Expect(page).NotTo(ContainSubstring("values not shown"))
	g.Expect(page).NotTo(ContainSubstring(`data-policy="quiet"`))

	// dave may list promotions, not Stacks: names only, and why.
	code, page, _ := get(t, baseURL, path, tokens[ns+"/dave"])
	g.Expect(code).To(Equal(http.StatusOK), page)
	text = html.UnescapeString(page)
	g.Expect(text).To(ContainSubstring("values not shown: you may not list Stacks in namespace " + ns))
	g.Expect(text).To(MatchRegexp(`(?s)data-urn="urn:pulumi:qa::web::test:index:Random::id">.*?replace</span>.*?<td class="changed">keepers</td>`))
	g.Expect(page).NotTo(ContainSubstring(`class="old"`))
	g.Expect(page).NotTo(ContainSubstring("[secret]"))
	g.Expect(page).NotTo(ContainSubstring(`class="patch"`))
	g.Expect(text).To(ContainSubstring("faster <pages>"), "the commits come from the promotion's status")

	// A stage without an approval policy: the fired rule's approvals make
	// the promotion wait, and decidable.
	dev := waitingForReview(t, ns, "dev")
	g.Eventually(func(g Gomega) {
		code, page, _ := get(t, baseURL, "/promotions/"+ns+"/"+dev, tokens[ns+"/alice"])
		g.Expect(code).To(Equal(http.StatusOK), page)
		g.Expect(page).To(ContainSubstring(`id="approve"`))
		g.Expect(page).To(ContainSubstring(`<li class="rule">policy no-replace: 2 approvals from group dba</li>`))
		g.Expect(page).NotTo(ContainSubstring("The stage asks for"))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	_, page, _ = get(t, baseURL, "/pipelines/"+ns+"/web", tokens[ns+"/alice"])
	g.Expect(page).To(MatchRegexp(`(?s)id="waiting".*?` + regexp.QuoteMeta(dev)))

	// No page, for anyone, carries the plaintext; the masked value shows.
	for _, who := range []string{"alice", "dave"} {
		for _, p := range []string{path, "/promotions/" + ns + "/" + dev, "/pipelines/" + ns + "/web", "/audit?namespace=" + ns} {
			_, body, _ := get(t, baseURL, p, tokens[ns+"/"+who])
			g.Expect(body).NotTo(ContainSubstring(reviewSecret), who+" "+p)
		}
	}
	_, page, _ = get(t, baseURL, path, tokens[ns+"/alice"])
	g.Expect(page).To(ContainSubstring("[secret]"))
	g.Expect(dashLogs.String()).NotTo(ContainSubstring(reviewSecret))
}

// TestHeldChangeReview: the page of a promotion of a held change shows
// the Stack's spec, field by field against the approved one, and who
// changed it, to those who may read Stacks; to others, why not.
func TestHeldChangeReview(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "team-h"
	g.Expect(seed(ctx, ns)).To(Succeed())
	g.Expect(user(ctx, ns, "dave", rule("promotion.stackyard.dev", []string{"*"}, "get", "list", "watch"))).To(Succeed())
	var stack pulumiv1.Stack
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "site-qa"}, &stack)).To(Succeed())
	stack.Status.HeldSpec = &shared.HeldSpec{Digest: "sha256:held", Generation: stack.Generation, EditedBy: "carol", Since: metav1.Now(),
		Changes: []shared.SpecChange{{Path: `config["web:message"]`, Op: shared.SpecChangeChanged, Old: `"first"`, New: `"<second>"`}}}
	g.Expect(env.Client.Status().Update(ctx, &stack)).To(Succeed())
	p := &promotionv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "qa-held-"},
		Spec: promotionv1alpha1.PromotionSpec{Stage: "qa", Release: "web-bbbbbbb", RequestedBy: "system:serviceaccount:" + ns + ":alice",
			HeldChange: &promotionv1alpha1.HeldChangeRef{Stack: "site-qa", Digest: "sha256:held"}},
	}
	g.Expect(asUser(t, tokens[ns+"/alice"]).Create(ctx, p)).To(Succeed())
	path := "/promotions/" + ns + "/" + p.Name

	var page string
	g.Eventually(func(g Gomega) {
		var code int
		code, page, _ = get(t, baseURL, path, tokens[ns+"/alice"])
		g.Expect(code).To(Equal(http.StatusOK), page)
		g.Expect(page).To(ContainSubstring(`id="held-change"`))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	text := html.UnescapeString(page)
	g.Expect(text).To(ContainSubstring("made by <strong>carol</strong>, whose own approval does not count"))
	g.Expect(text).To(ContainSubstring(`<td><code>config["web:message"]</code></td><td><code>"first"</code></td><td><code>"<second>"</code></td>`))
	g.Expect(page).NotTo(ContainSubstring(`"<second>"`), "a held value is escaped")

	code, page, _ := get(t, baseURL, path, tokens[ns+"/dave"])
	g.Expect(code).To(Equal(http.StatusOK), page)
	g.Expect(page).To(ContainSubstring("you may not read Stacks in namespace " + ns))
	g.Expect(html.UnescapeString(page)).NotTo(ContainSubstring("web:message"))
}
