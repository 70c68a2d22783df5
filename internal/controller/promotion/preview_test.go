package promotion_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackyard/stackyard/internal/change"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/controller/promotion"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// deployed waits until the Stack ns/name is Ready with its last successful
// update at commit.
func deployed(t *testing.T, ns, name, commit string) {
	t.Helper()
	waitFor(t, &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		g.Expect(sreconcile.IsReady(s.Status.Conditions)).To(BeTrue())
		g.Expect(s.Status.LastUpdate).NotTo(BeNil())
		g.Expect(s.Status.LastUpdate.LastSuccessfulCommit).To(Equal(commit))
	})
}

// deployedWithRelease makes a namespace holding the Stack web deployed at
// a commit of project("v1"), the pipeline web, and its Release r2 of a
// later commit whose Pulumi.yaml is next. It returns the namespace, the
// two commits and the file the Stack writes.
func deployedWithRelease(t *testing.T, next string) (ns, c1, c2, file string) {
	t.Helper()
	ns = newNamespace(t)
	repo := newProgramRepo(t)
	c1 = repo.commit("v1")
	c2 = repo.Commit("main", map[string]string{"Pulumi.yaml": next})
	s, file := gitStack(t, ns, "web", repo.URL, c1)
	create(t, s)
	deployed(t, ns, "web", c1)
	create(t, pipeline(ns, repo.URL))
	create(t, release(ns, "r2", c2, time.Now()))
	return ns, c1, c2, file
}

// previewObjects lists the Workspaces and the Updates labelled as the
// promotion's previews.
func previewObjects(g Gomega, ns, promotionName string) ([]autov1alpha1.Workspace, []autov1alpha1.Update) {
	sel := client.MatchingLabels{promotion.PromotionLabel: promotionName}
	var wss autov1alpha1.WorkspaceList
	g.Expect(env.Client.List(context.Background(), &wss, client.InNamespace(ns), sel)).To(Succeed())
	var upds autov1alpha1.UpdateList
	g.Expect(env.Client.List(context.Background(), &upds, client.InNamespace(ns), sel)).To(Succeed())
	return wss.Items, upds.Items
}

// TestPreviewBeforeUpdate promotes a release that changes the content of
// the Stack's file: the promotion first previews it, with the Stack's own
// config, and records one update of the property content (its name, not
// its value) before the Stack is pinned; the preview's Workspace is gone
// once the preview is in, and its Update stays, owned by the promotion.
func TestPreviewBeforeUpdate(t *testing.T) {
	g := NewWithT(t)
	ns, _, _, file := deployedWithRelease(t, project("secret-looking-v2"))
	create(t, stage(ns, "dev", []string{"web"}, nil))
	create(t, askFor(ns, "to-dev", "dev", "r2", false))

	p := waitFinished(t, ns, "to-dev", opTimeout)
	g.Expect(p.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), p.Status.Message)
	g.Expect(readFile(g, file)).To(Equal("secret-looking-v2"))
	g.Expect(previewsOf(g, p)).To(HaveLen(1))
	pv := previewsOf(g, p)[0]
	g.Expect(pv.Name).To(Equal("web"))
	g.Expect(pv.Summary).To(Equal(&promotionv1alpha1.ChangeSummary{Update: 1, Same: 1}))
	g.Expect(pv.Changes).To(ConsistOf(SatisfyAll(
		HaveField("URN", HaveSuffix("stackyardtest:index:File::page")),
		HaveField("Op", "update"),
		HaveField("Properties", ConsistOf("content")),
	)))
	g.Expect(pv.Message).To(Equal("1 to update, 1 unchanged"))
	g.Expect(fmt.Sprintf("%+v", previewsOf(g, p))).NotTo(ContainSubstring("secret-looking"), "a preview records property names, never values")

	// The preview ran at the release's commit in a Workspace of its own,
	// which is gone; its Update stays as the record, the promotion's.
	NewWithT(t).Eventually(func(g Gomega) {
		wss, upds := previewObjects(g, ns, "to-dev")
		g.Expect(wss).To(BeEmpty())
		g.Expect(upds).To(ConsistOf(SatisfyAll(
			HaveField("Name", pv.Update),
			HaveField("Spec.Type", autov1alpha1.PreviewType),
			HaveField("Spec.WorkspaceName", change.PreviewName("to-dev", "web", 1)),
			HaveField("Labels", Not(HaveKey("pulumi.com/stack-name"))),
			WithTransform(func(u autov1alpha1.Update) bool { return metav1.IsControlledBy(&u, p) }, BeTrue()),
		)))
	}, time.Minute, 250*time.Millisecond).Should(Succeed())
}

// TestFailedPreview promotes a release whose program fails in preview: the
// promotion fails before anything changes (the Stack keeps its commit, the
// file its content), and the release is failed in the stage.
func TestFailedPreview(t *testing.T) {
	g := NewWithT(t)
	// The File's path is relative, which the test provider's Check
	// refuses.
	broken := strings.Replace(project("broken"), "${path}", "relative/page.txt", 1)
	ns, c1, _, file := deployedWithRelease(t, broken)
	create(t, stage(ns, "dev", []string{"web"}, nil))
	create(t, askFor(ns, "to-dev", "dev", "r2", false))

	p := waitFinished(t, ns, "to-dev", opTimeout)
	g.Expect(p.Status.Phase).To(Equal(promotionv1alpha1.PromotionFailed))
	g.Expect(p.Status.Message).To(SatisfyAll(
		HavePrefix("the preview of Stack web failed"),
		ContainSubstring("must be an absolute path"),
		HaveSuffix("nothing was changed"),
	))
	g.Expect(p.Status.Stacks).To(BeEmpty(), "no Stack was recorded for a pin")
	g.Expect(previewsOf(g, p)).To(ConsistOf(SatisfyAll(HaveField("Name", "web"), HaveField("Summary", BeNil()), HaveField("Message", HavePrefix("UpdateFailed: ")))))

	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	get(g, stack)
	g.Expect(stack.Spec.Commit).To(Equal(c1))
	g.Expect(readFile(g, file)).To(Equal("v1"))
	r := &promotionv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r2"}}
	get(g, r)
	g.Expect(r.Status.FailedIn).To(HaveKeyWithValue("dev", HaveField("Promotion", "to-dev")))
	g.Expect(r.Status.VerifiedIn).To(BeEmpty())
	NewWithT(t).Eventually(func(g Gomega) {
		wss, _ := previewObjects(g, ns, "to-dev")
		g.Expect(wss).To(BeEmpty())
	}, time.Minute, 250*time.Millisecond).Should(Succeed())
}

// TestPreviewOnlyStage promotes into a preview stage that binds the Stack
// of an older, deploying stage (the seed's "preview → dev"): the promotion
// previews, succeeds and verifies the release there, and the Stack is
// neither pinned nor updated; neither stage claims the other's Stack.
func TestPreviewOnlyStage(t *testing.T) {
	g := NewWithT(t)
	ns, c1, c2, file := deployedWithRelease(t, project("v2"))
	before := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	get(g, before)
	create(t, stage(ns, "dev", []string{"web"}, nil))
	create(t, stage(ns, "preview", []string{"web"}, func(spec *promotionv1alpha1.StageSpec) { spec.PreviewOnly = true }))
	create(t, askFor(ns, "look", "preview", "r2", false))

	p := waitFinished(t, ns, "look", opTimeout)
	g.Expect(p.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), p.Status.Message)
	g.Expect(p.Status.Message).To(ContainSubstring("web: 1 to update"))
	g.Expect(p.Status.Commit).To(Equal(c2))
	g.Expect(p.Status.StartTime).NotTo(BeNil())
	g.Expect(p.Status.Stacks).To(BeEmpty())
	g.Expect(previewsOf(g, p)).To(ConsistOf(HaveField("Summary", Equal(&promotionv1alpha1.ChangeSummary{Update: 1, Same: 1}))))

	r := &promotionv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r2"}}
	get(g, r)
	g.Expect(r.Status.VerifiedIn).To(HaveKeyWithValue("preview", HaveField("Promotion", "look")))

	after := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	get(g, after)
	g.Expect(after.Spec.Commit).To(Equal(c1))
	g.Expect(after.Generation).To(Equal(before.Generation))
	g.Expect(after.Status.LastUpdate.Name).To(Equal(before.Status.LastUpdate.Name), "the Stack ran no update")
	g.Expect(readFile(g, file)).To(Equal("v1"))
	for _, f := range after.ManagedFields {
		g.Expect(f.Manager).NotTo(Equal(promotion.FieldManager), "nothing was pinned")
	}
	for _, name := range []string{"dev", "preview"} {
		st := &promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		get(g, st)
		g.Expect(st.Status.Conditions).NotTo(ContainElement(SatisfyAll(
			HaveField("Type", sreconcile.StalledCondition), HaveField("Status", metav1.ConditionTrue))), describeStage(st))
	}
}

// TestRecordNameTaken: an object made under the name of a promotion's
// record of a Stack before the promotion made it (only an administrator
// can: the admission policy keeps StackPromotions the operator's) is
// never read as the record. The promotion fails, naming it, with nothing
// deployed, and the object is left as it was.
func TestRecordNameTaken(t *testing.T) {
	g := NewWithT(t)
	ns, c1, _, file := deployedWithRelease(t, project("v2"))
	create(t, stage(ns, "dev", []string{"web"}, nil))
	squat := &promotionv1alpha1.StackPromotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: change.StackPromotionName("to-dev", "web"),
			Labels: map[string]string{promotionv1alpha1.PromotionLabel: "to-dev", promotionv1alpha1.StackLabel: "web"}},
		Promotion: "to-dev", Stack: "web", Preview: &promotionv1alpha1.StackPreview{Name: "web", Message: "planted"},
	}
	create(t, squat)
	create(t, askFor(ns, "to-dev", "dev", "r2", false))

	p := waitFinished(t, ns, "to-dev", opTimeout)
	g.Expect(p.Status.Phase).To(Equal(promotionv1alpha1.PromotionFailed), p.Status.Message)
	g.Expect(p.Status.Message).To(ContainSubstring("StackPromotion " + squat.Name + ", where the promotion records Stack web, exists and is not its record"))
	g.Expect(previewsOf(g, p)).To(BeEmpty(), "the planted object was read as a record")
	g.Expect(readFile(g, file)).To(Equal("v1"))
	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	get(g, stack)
	g.Expect(stack.Spec.GitSource.Commit).To(Equal(c1), "the Stack was pinned")
	get(g, squat)
	g.Expect(squat.Preview.Message).To(Equal("planted"))
}

// TestPreviewsAtMostAtOnce: a stage that previews one Stack at a time
// (spec.rollout.maxParallelPreviews) starts each preview once the one
// before it has ended, says how many wait, and promotes as usual once all
// are in.
func TestPreviewsAtMostAtOnce(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo := newProgramRepo(t)
	c1, c2 := repo.commit("v1"), repo.commit("v2")
	names := []string{"web-a", "web-b", "web-c"}
	for _, name := range names {
		s, _ := gitStack(t, ns, name, repo.URL, c1)
		create(t, s)
	}
	for _, name := range names {
		deployed(t, ns, name, c1)
	}
	create(t, pipeline(ns, repo.URL))
	create(t, release(ns, "r2", c2, time.Now()))
	create(t, stage(ns, "dev", names, func(spec *promotionv1alpha1.StageSpec) {
		spec.Rollout = &promotionv1alpha1.Rollout{MaxParallelPreviews: 1}
	}))
	p := askFor(ns, "to-dev", "dev", "r2", false)
	create(t, p)
	waitFor(t, p, opTimeout, func(g Gomega, p *promotionv1alpha1.Promotion) {
		g.Expect(p.Status.Message).To(ContainSubstring("2 more Stacks wait their turn (previewed 1 at a time)"))
	})
	done := waitFinished(t, ns, "to-dev", opTimeout)
	g.Expect(done.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), describe(done))
	g.Expect(done.Status.Previewed).To(Equal(int32(3)))

	_, upds := previewObjects(g, ns, "to-dev")
	g.Expect(upds).To(HaveLen(3))
	slices.SortFunc(upds, func(a, b autov1alpha1.Update) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	for i := 1; i < len(upds); i++ {
		g.Expect(upds[i].CreationTimestamp.Before(&upds[i-1].Status.EndTime)).To(BeFalse(),
			"preview %s was made before preview %s ended", upds[i].Name, upds[i-1].Name)
	}
}
