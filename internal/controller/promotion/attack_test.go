package promotion_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/stackrun"
)

// TestAttacksLeaveProdAlone runs the threat model's attacks on a live
// pipeline, against the whole operator: dev (ungated, auto-promoting) and
// prod (one approval, fed by dev) each deploy a Stack; a release dev has
// verified waits for prod's approval. Mallory, a ServiceAccount holding
// ordinary rights on stages, Stacks, releases, promotions and their status
// but none of govern, approve or record, authenticated by a bearer token
// only, tries the paths to prod around the approval: binding prod's Stack
// to dev, feeding prod directly, making dev preview-only, deleting prod,
// pinning or rebinding prod's Stack, forging a release, approving her own
// promotion, and writing its status. Each is refused. An Update she plants
// on prod's Workspace, claiming prod's Stack under another kind, fails
// before it runs; a preview-only stage of her own pipeline, which follows
// an unmerged branch, listing prod's Stack, previews nothing with prod's
// credentials. Then a new release
// goes through dev, as would carry prod along had one of them landed; the
// proof that nothing happened is the test provider's output for prod,
// unchanged, and the prod Stack's last successful commit.
func TestAttacksLeaveProdAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	repo := newProgramRepo(t)
	c1 := repo.commit("v1")
	devStack, devFile := gitStack(t, ns, "web-dev", repo.URL, c1)
	prodStack, prodFile := gitStack(t, ns, "web-prod", repo.URL, c1)
	create(t, devStack)
	create(t, prodStack)
	deployed(t, ns, "web-dev", c1)
	deployed(t, ns, "web-prod", c1)

	create(t, pipeline(ns, repo.URL))
	dev := stage(ns, "dev", []string{"web-dev"}, func(spec *promotionv1alpha1.StageSpec) {
		spec.AutoPromotionOptions = &promotionv1alpha1.AutoPromotionOptions{Enabled: true}
	})
	prod := stage(ns, "prod", []string{"web-prod"}, func(spec *promotionv1alpha1.StageSpec) {
		spec.Sources = promotionv1alpha1.ReleaseSources{Stages: []string{"dev"}}
		spec.Approval = &promotionv1alpha1.ApprovalPolicy{Required: 1}
	})
	create(t, dev)
	create(t, prod)
	c2 := repo.commit("v2")
	create(t, release(ns, "r2", c2, time.Now()))
	g.Eventually(func() string { return readFile(g, devFile) }, opTimeout, 250*time.Millisecond).Should(Equal("v2"))

	ordinary := func(group string, resources ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}
	}
	mallory, err := env.TokenClient(ctx, ns, "mallory",
		ordinary(promotionv1alpha1.GroupVersion.Group, "stages", "releases", "releases/status", "promotions", "promotions/status", "approvals"),
		ordinary(pulumiv1.GroupVersion.Group, "stacks"),
		ordinary(autov1alpha1.GroupVersion.Group, "updates"),
		ordinary(promotionv1alpha1.GroupVersion.Group, "pipelines"),
		rbacv1.PolicyRule{APIGroups: []string{promotionv1alpha1.GroupVersion.Group}, Resources: []string{"stages"},
			ResourceNames: []string{"peek"}, Verbs: []string{promotionv1alpha1.VerbGovern}})
	g.Expect(err).NotTo(HaveOccurred())
	merge := func(v any) client.Patch {
		data, err := json.Marshal(v)
		g.Expect(err).NotTo(HaveOccurred())
		return client.RawPatch(types.MergePatchType, data)
	}
	spec := func(v map[string]any) client.Patch { return merge(map[string]any{"spec": v}) }
	refused := func(what string, err error) {
		t.Helper()
		g.Expect(err).To(HaveOccurred(), "%s was accepted", what)
	}
	refused("binding prod's Stack to dev", mallory.Patch(ctx, dev.DeepCopy(), spec(map[string]any{
		"stacks": []any{map[string]any{"name": "web-dev"}, map[string]any{"name": "web-prod"}}})))
	refused("feeding prod directly", mallory.Patch(ctx, prod.DeepCopy(), spec(map[string]any{"sources": map[string]any{"direct": true, "stages": nil}})))
	refused("dropping prod's approval", mallory.Patch(ctx, prod.DeepCopy(), spec(map[string]any{"approval": nil})))
	refused("making dev preview-only", mallory.Patch(ctx, dev.DeepCopy(), spec(map[string]any{"previewOnly": true})))
	refused("deleting prod", mallory.Delete(ctx, prod.DeepCopy()))
	live := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-prod"}}
	get(g, live)
	refused("pinning prod's Stack", mallory.Patch(ctx, live.DeepCopy(), spec(map[string]any{"commit": c2})))
	refused("rebinding prod's Stack to dev", mallory.Patch(ctx, live.DeepCopy(), merge(map[string]any{"metadata": map[string]any{
		"annotations": map[string]any{promotionv1alpha1.AuthorizedStageAnnotation: "dev"}}})))
	refused("forging a release", mallory.Create(ctx, release(ns, "forged", c2, time.Now())))

	// Asking is allowed; deciding is not.
	user := "system:serviceaccount:" + ns + ":mallory"
	ask := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mallory-to-prod"},
		Spec: promotionv1alpha1.PromotionSpec{Stage: "prod", Release: "r2", RequestedBy: user, Reason: "trust me"}}
	g.Expect(mallory.Create(ctx, ask)).To(Succeed())
	waitMessage(t, ask, "waiting for approval: 0 of 1")
	refused("approving without the verb approve", mallory.Create(ctx, &promotionv1alpha1.Approval{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "self"},
		Spec: promotionv1alpha1.ApprovalSpec{Promotion: ask.Name, Stage: "prod", PlanDigest: ask.Status.PlanDigest,
			Decision: promotionv1alpha1.Approve, User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}},
	}))
	refused("writing the promotion's status", mallory.Status().Patch(ctx, ask.DeepCopy(), merge(map[string]any{"status": map[string]any{"phase": "Running"}})))

	// The choke point: an Update planted on prod's Workspace, claiming as
	// its controller a kind of another group named as prod's Stack, with
	// its UID, fails before it runs.
	planted := &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "planted", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "example.com/v1", Kind: "Stack", Name: live.Name, UID: live.UID, Controller: ptr.To(true)}}},
		Spec: autov1alpha1.UpdateSpec{WorkspaceName: stackrun.WorkspaceName(live), StackName: live.Spec.Stack, Type: autov1alpha1.DestroyType},
	}
	g.Expect(mallory.Create(ctx, planted)).To(Succeed(), "anyone may create an Update of their own")
	waitFor(t, planted, opTimeout, func(g Gomega, u *autov1alpha1.Update) {
		g.Expect(u.Status.IsComplete()).To(BeTrue())
		f := apimeta.FindStatusCondition(u.Status.Conditions, autov1alpha1.UpdateConditionTypeFailed)
		g.Expect(f).NotTo(BeNil())
		g.Expect(f.Reason).To(Equal(change.RefusedForeignUpdate))
		g.Expect(u.Status.StartTime.IsZero()).To(BeTrue(), "the operation must never have started")
	})
	g.Expect(readFile(g, prodFile)).To(Equal("v1"), "the planted destroy ran")

	// A preview runs the program with the Stack's credentials: Mallory's
	// own pipeline, following a branch nobody merged, and her own
	// preview-only stage listing prod's Stack, get no preview of it.
	side := repo.Commit("side", map[string]string{"Pulumi.yaml": project("side")})
	mine := &promotionv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "side"},
		Spec: promotionv1alpha1.PipelineSpec{Git: promotionv1alpha1.GitSubscription{RepoURL: repo.URL, Branch: "side"},
			Interval: &metav1.Duration{Duration: time.Second}}}
	g.Expect(mallory.Create(ctx, mine)).To(Succeed())
	peek := stage(ns, "peek", []string{"web-prod"}, func(spec *promotionv1alpha1.StageSpec) { spec.PreviewOnly = true })
	peek.Spec.Pipeline = "side"
	g.Expect(mallory.Create(ctx, peek)).To(Succeed(), "Mallory governs her own stage")
	waitFor(t, peek, opTimeout, func(g Gomega, st *promotionv1alpha1.Stage) {
		c := apimeta.FindStatusCondition(st.Status.Conditions, "Stalled")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring(`does not let stage "peek" preview it`))
	})
	var releases promotionv1alpha1.ReleaseList
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.List(ctx, &releases, client.InNamespace(ns), client.MatchingLabels{promotionv1alpha1.PipelineLabel: "side"})).To(Succeed())
		g.Expect(releases.Items).NotTo(BeEmpty())
		g.Expect(releases.Items[0].Spec.Commit.SHA).To(Equal(side))
	}, opTimeout, 250*time.Millisecond).Should(Succeed())
	peekAsk := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mallory-peeks"},
		Spec: promotionv1alpha1.PromotionSpec{Stage: "peek", Release: releases.Items[0].Name, RequestedBy: user}}
	g.Expect(mallory.Create(ctx, peekAsk)).To(Succeed())
	waitFor(t, peekAsk, opTimeout, func(g Gomega, p *promotionv1alpha1.Promotion) {
		g.Expect(p.Status.Phase.IsFinished()).To(BeTrue())
		g.Expect(p.Status.Message).To(ContainSubstring(`does not let stage "peek" preview it`))
	})
	var made autov1alpha1.UpdateList
	g.Expect(env.Client.List(ctx, &made, client.InNamespace(ns))).To(Succeed())
	for _, u := range made.Items {
		g.Expect(metav1.IsControlledBy(&u, peekAsk)).To(BeFalse(), "Update %s previews prod's Stack for Mallory's stage", u.Name)
	}

	// A new release goes through dev, as it would carry prod along had
	// any attack landed; prod stays where it was.
	c3 := repo.commit("v3")
	create(t, release(ns, "r3", c3, time.Now()))
	g.Eventually(func() string { return readFile(g, devFile) }, opTimeout, 250*time.Millisecond).Should(Equal("v3"))
	// A negative check, bounded by time on purpose: dev at v3 is the
	// witness that the controllers have acted on the new release, and a
	// promotion that slipped past the gate would follow it within a few
	// reconciles; no event marks "prod was not promoted". The refusals
	// above are the direct checks; this one catches a gate that opened
	// anyway.
	g.Consistently(func(g Gomega) {
		g.Expect(readFile(g, prodFile)).To(Equal("v1"), "the test provider wrote prod's file")
		get(g, live)
		g.Expect(live.Status.LastUpdate.LastSuccessfulCommit).To(Equal(c1))
		g.Expect(live.Spec.Commit).To(Equal(c1))
		get(g, ask)
		g.Expect(ask.Status.Phase).To(Equal(promotionv1alpha1.PromotionPending))
	}, 3*time.Second, 250*time.Millisecond).Should(Succeed())
}
