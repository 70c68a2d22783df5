package promotion_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// TestStageSelectsStacks: a stage that selects its Stacks by label
// deploys those of them that consent to it, and leaves alone, listing
// them in its status, those that match without consent. A labelled Stack
// is not a member by its label alone: a Stack that consents but is not
// labelled is not deployed until it is, and then the next promotion
// previews and deploys it like the others.
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
		{"late", nil, "edge"}, // bound to edge, but not labelled yet
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
	g.Expect(first.Status.Previews).To(ConsistOf(HaveField("Name", "web-eu"), HaveField("Name", "web-us")))
	for name, want := range map[string]string{"web-eu": "v2", "web-us": "v2", "web-ap": "v1", "late": "v1"} {
		g.Expect(readFile(g, files[name])).To(Equal(want), "Stack %s", name)
	}

	// late gets the label: it is a member now, and the next promotion
	// previews and deploys it; web-ap still matches without consent.
	late := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"}}
	get(g, late)
	late.Labels = fleet
	g.Expect(env.Client.Update(ctx, late)).To(Succeed())
	waitFor(t, edge, opTimeout, func(g Gomega, st *promotionv1alpha1.Stage) {
		g.Expect(st.Status.StackCount).To(Equal(int32(3)))
	})
	create(t, release(ns, "r3", c3, time.Now()))
	create(t, askFor(ns, "second", "edge", "r3", false))
	second := waitFinished(t, ns, "second", opTimeout)
	g.Expect(second.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), describe(second))
	g.Expect(second.Status.Previews).To(ConsistOf(HaveField("Name", "late"), HaveField("Name", "web-eu"), HaveField("Name", "web-us")))
	for name, want := range map[string]string{"web-eu": "v3", "web-us": "v3", "web-ap": "v1", "late": "v3"} {
		g.Expect(readFile(g, files[name])).To(Equal(want), "Stack %s", name)
	}
}
