package promotion_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// TestSeedPipeline is the seed's shape: releases promoted automatically
// into dev and dev2 in parallel, and into qa, fed by both with All and a
// soak time, only once both verified the release and it soaked; then a
// rollback of qa and a manual promotion.
func TestSeedPipeline(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	repo := newProgramRepo(t)
	c0, c1, c2 := repo.commit("v0"), repo.commit("v1"), repo.commit("v2")
	const soak = 3 * time.Second

	files := map[string]string{}
	for _, name := range []string{"dev", "dev2", "qa"} {
		s, file := gitStack(t, ns, name, repo.URL, c0)
		create(t, s)
		files[name] = file
	}
	create(t, pipeline(ns, repo.URL))
	base := time.Now().Add(-time.Hour)
	create(t, release(ns, "r1", c1, base))
	create(t, stage(ns, "dev", []string{"dev"}, autoPromote))
	create(t, stage(ns, "dev2", []string{"dev2"}, autoPromote))
	create(t, stage(ns, "qa", []string{"qa"}, func(spec *promotionv1alpha1.StageSpec) {
		autoPromote(spec)
		spec.Sources = promotionv1alpha1.ReleaseSources{
			Stages: []string{"dev", "dev2"}, AvailabilityStrategy: promotionv1alpha1.All, RequiredSoakTime: &metav1.Duration{Duration: soak},
		}
	}))

	// r1 reaches dev and dev2 by itself, then qa, after both and the soak.
	qaOf := func(releaseName string) {
		t.Helper()
		dev, dev2 := waitPromotionOf(t, ns, "dev", releaseName), waitPromotionOf(t, ns, "dev2", releaseName)
		for _, p := range []*promotionv1alpha1.Promotion{dev, dev2} {
			g.Expect(p.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), p.Status.Message)
			g.Expect(p.Spec.RequestedBy).To(Equal(promotionv1alpha1.RequestedByAutoPromotion))
		}
		qa := waitPromotionOf(t, ns, "qa", releaseName)
		g.Expect(qa.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), qa.Status.Message)
		r := &promotionv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: releaseName}}
		get(g, r)
		verified := r.Status.VerifiedIn["dev"].Since.Time
		if v := r.Status.VerifiedIn["dev2"].Since.Time; v.After(verified) {
			verified = v
		}
		g.Expect(qa.CreationTimestamp.Time).NotTo(BeTemporally("<", verified.Add(soak)),
			"qa's promotion was asked for before %s had soaked %s after its verification in both dev and dev2", releaseName, soak)
		g.Expect(r.Status.VerifiedIn).To(HaveKeyWithValue("qa", HaveField("Promotion", qa.Name)))
		g.Expect(r.Status.CurrentlyIn).To(SatisfyAll(HaveKey("dev"), HaveKey("dev2"), HaveKey("qa")))
	}
	qaOf("r1")
	for name, file := range files {
		g.Expect(readFile(g, file)).To(Equal("v1"), "Stack %s", name)
	}
	qa := waitFor(t, &promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "qa"}}, opTimeout, func(g Gomega, st *promotionv1alpha1.Stage) {
		g.Expect(st.Status.CurrentRelease).To(HaveField("Name", "r1"))
		g.Expect(st.Status.Health).To(HaveField("Status", promotionv1alpha1.Healthy))
		g.Expect(st.Status.WaitingFor).To(BeEmpty())
	})
	g.Expect(qa.Status.History).To(HaveLen(1))
	g.Expect(eventReasons(g, ns, "Stage", "qa")).To(ContainElements(promotionv1alpha1.EventPromotionStarted, promotionv1alpha1.EventPromotionSucceeded))

	// r2 follows the same way; r1 leaves every stage.
	create(t, release(ns, "r2", c2, base.Add(time.Minute)))
	qaOf("r2")
	r1 := &promotionv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r1"}}
	get(g, r1)
	g.Expect(r1.Status.CurrentlyIn).To(BeEmpty())
	g.Expect(readFile(g, files["qa"])).To(Equal("v2"))

	// A rollback of qa to r1 sticks: auto-promotion does not bring r2 back.
	create(t, askFor(ns, "qa-rollback", "qa", "r1", true))
	rollback := waitFinished(t, ns, "qa-rollback", opTimeout)
	g.Expect(rollback.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), rollback.Status.Message)
	g.Expect(rollback.Status.Stacks).To(ConsistOf(SatisfyAll(
		HaveField("Name", "qa"), HaveField("PreviousCommit", c2), HaveField("Commit", c1), HaveField("Update", Not(BeEmpty())),
	)))
	g.Expect(rollback.Labels).To(HaveKeyWithValue(promotionv1alpha1.StageLabel, "qa"))
	g.Expect(readFile(g, files["qa"])).To(Equal("v1"))
	waitFor(t, qa, opTimeout, func(g Gomega, st *promotionv1alpha1.Stage) {
		g.Expect(st.Status.CurrentRelease).To(SatisfyAll(HaveField("Name", "r1"), HaveField("Rollback", true)))
		g.Expect(st.Status.History).To(HaveLen(3))
		g.Expect(st.Status.History[0]).To(SatisfyAll(HaveField("Promotion", "qa-rollback"), HaveField("Rollback", true)))
		g.Expect(st.Status.WaitingFor).To(BeEmpty())
	})
	g.Expect(promotionsOf(g, ns, "qa")).To(HaveLen(3))

	// A person promotes r2 again.
	create(t, askFor(ns, "qa-again", "qa", "r2", false))
	again := waitFinished(t, ns, "qa-again", opTimeout)
	g.Expect(again.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), again.Status.Message)
	g.Expect(readFile(g, files["qa"])).To(Equal("v2"))

	// A finished promotion is a record: its status cannot change.
	again.Status.Message = "rewritten"
	g.Expect(env.Client.Status().Update(ctx, again)).To(MatchError(ContainSubstring("a finished Promotion is a record")))
}
