package promotion_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// TestStageSelectsStacks: a stage that selects its Stacks by label
// deploys those of them that consent to it, and leaves alone, listing
// them in its status, those that match without consent. A Stack that
// gains the label and then the consent is previewed and deployed by the
// next promotion like the others. A label is anyone's to write, so
// removing one from a member cannot quietly take it out of the stage's
// promotions: the stage says the Stack is bound to it but not selected,
// and a promotion is refused, naming it, until the label is back.
func TestStageSelectsStacks(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	repo := newProgramRepo(t)
	c1, c2, c3 := repo.commit("v1"), repo.commit("v2"), repo.commit("v3")
	fleet := map[string]string{"fleet": "web"}
	files := map[string]string{}
	for _, s := range []struct {
		name    string
		labels  map[string]string
		consent string
	}{
		{"web-eu", fleet, "edge"},
		{"web-us", fleet, "edge"},
		{"web-ap", fleet, ""}, // matches, but no governor bound it to edge
		{"late", nil, ""},     // neither, yet
	} {
		stack, file := gitStack(t, ns, s.name, repo.URL, c1)
		stack.Labels = s.labels
		if s.consent != "" {
			stack.Annotations = map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: s.consent}
		}
		create(t, stack)
		files[s.name] = file
	}
	for name := range files {
		deployed(t, ns, name, c1)
	}

	create(t, pipeline(ns, repo.URL))
	create(t, release(ns, "r2", c2, time.Now()))
	create(t, stage(ns, "edge", nil, func(s *promotionv1alpha1.StageSpec) {
		s.StackSelector = &metav1.LabelSelector{MatchLabels: fleet}
	}))
	edge := &promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"}}
	waitFor(t, edge, opTimeout, func(g Gomega, st *promotionv1alpha1.Stage) {
		g.Expect(st.Status.StackCount).To(Equal(int32(2)))
		g.Expect(st.Status.UnconsentedStacks).To(Equal([]string{"web-ap"}))
		g.Expect(st.Status.UnconsentedStackCount).To(Equal(int32(1)))
	})

	create(t, askFor(ns, "first", "edge", "r2", false))
	first := waitFinished(t, ns, "first", opTimeout)
	g.Expect(first.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), describe(first))
	g.Expect(first.Status.Stacks).To(ConsistOf(HaveField("Name", "web-eu"), HaveField("Name", "web-us")))
	g.Expect(previewsOf(g, first)).To(ConsistOf(HaveField("Name", "web-eu"), HaveField("Name", "web-us")))
	for name, want := range map[string]string{"web-eu": "v2", "web-us": "v2", "web-ap": "v1", "late": "v1"} {
		g.Expect(readFile(g, files[name])).To(Equal(want), "Stack %s", name)
	}

	// late gets the label: it matches, without consent; then a governor
	// binds it, and it is a member. The next promotion previews and
	// deploys it; web-ap still matches without consent.
	late := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"}}
	get(g, late)
	late.Labels = fleet
	g.Expect(env.Client.Update(ctx, late)).To(Succeed())
	waitFor(t, edge, opTimeout, func(g Gomega, st *promotionv1alpha1.Stage) {
		g.Expect(st.Status.UnconsentedStacks).To(Equal([]string{"late", "web-ap"}))
	})
	get(g, late)
	late.Annotations = map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: "edge"}
	g.Expect(env.Client.Update(ctx, late)).To(Succeed())
	waitFor(t, edge, opTimeout, func(g Gomega, st *promotionv1alpha1.Stage) {
		g.Expect(st.Status.StackCount).To(Equal(int32(3)))
		g.Expect(st.Status.UnconsentedStacks).To(Equal([]string{"web-ap"}))
	})
	create(t, release(ns, "r3", c3, time.Now()))
	create(t, askFor(ns, "second", "edge", "r3", false))
	second := waitFinished(t, ns, "second", opTimeout)
	g.Expect(second.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), describe(second))
	g.Expect(previewsOf(g, second)).To(ConsistOf(HaveField("Name", "late"), HaveField("Name", "web-eu"), HaveField("Name", "web-us")))
	for name, want := range map[string]string{"web-eu": "v3", "web-us": "v3", "web-ap": "v1", "late": "v3"} {
		g.Expect(readFile(g, files[name])).To(Equal(want), "Stack %s", name)
	}

	// Someone who may edit Stacks removes web-us's label: the stage does
	// not drop it unseen, and a promotion is refused, naming it.
	us := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-us"}}
	get(g, us)
	us.Labels = nil
	g.Expect(env.Client.Update(ctx, us)).To(Succeed())
	waitFor(t, edge, opTimeout, func(g Gomega, st *promotionv1alpha1.Stage) {
		c := apimeta.FindStatusCondition(st.Status.Conditions, "Reconciling")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring("Stacks web-us are bound to stage edge"))
		g.Expect(c.Reason).To(Equal(promotionv1alpha1.StageReasonStacksUnselected))
	})
	create(t, askFor(ns, "third", "edge", "r2", true))
	third := waitFinished(t, ns, "third", opTimeout)
	g.Expect(third.Status.Phase).To(Equal(promotionv1alpha1.PromotionAborted), describe(third))
	g.Expect(third.Status.Message).To(ContainSubstring("spec.stackSelector: Stacks web-us are bound to stage edge"))
	g.Expect(readFile(g, files["web-eu"])).To(Equal("v3"), "the refused promotion changed a Stack")
}
