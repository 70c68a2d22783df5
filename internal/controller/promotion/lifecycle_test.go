package promotion_test

import (
	"testing"
	"time"

	sreconcile "github.com/stackyard/stackyard/internal/reconcile"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// TestQueueAndWindow asks for two promotions into a stage whose promotion
// window opens a few seconds later: the older is Aborted as superseded at
// once, the newer waits Pending, and starts only once the window is open
// (its Stack is missing, so it then fails, touching nothing).
func TestQueueAndWindow(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	create(t, pipeline(ns, "http://127.0.0.1:9/web.git"))
	create(t, release(ns, "r1", sha1, time.Now()))
	opens := time.Now().Add(4 * time.Second).Truncate(time.Second)
	create(t, stage(ns, "prod", []string{"ghost"}, func(s *promotionv1alpha1.StageSpec) {
		s.PromotionWindows = []promotionv1alpha1.PromotionWindow{{
			Kind: promotionv1alpha1.Allow, RRule: "FREQ=DAILY", DTStart: metav1.NewTime(opens), DTEnd: metav1.NewTime(opens.Add(time.Hour)),
		}}
	}))
	create(t, askFor(ns, "first", "prod", "r1", false))
	waitFor(t, &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first"}}, time.Minute,
		func(g Gomega, p *promotionv1alpha1.Promotion) {
			g.Expect(p.Status.Phase).To(Equal(promotionv1alpha1.PromotionPending))
			g.Expect(p.Status.Message).To(HavePrefix("waiting for promotion window: stage prod's next opens at"))
		})
	create(t, askFor(ns, "second", "prod", "r1", false))

	first := waitFinished(t, ns, "first", time.Minute)
	g.Expect(first.Status.Phase).To(Equal(promotionv1alpha1.PromotionAborted))
	g.Expect(first.Status.Message).To(Equal("superseded by second"))
	g.Expect(first.Status.StartTime).To(BeNil())

	second := waitFinished(t, ns, "second", time.Minute)
	g.Expect(second.Status.Phase).To(Equal(promotionv1alpha1.PromotionFailed), second.Status.Message)
	g.Expect(second.Status.Message).To(ContainSubstring(`Stack "ghost" not found`))
	g.Expect(second.Status.StartTime.Time).NotTo(BeTemporally("<", opens), "it started before the window opened")
}

// TestRetention keeps the pipeline's promotionRetention finished
// promotions of a stage, the newest; each deletion leaves an event on the
// stage.
func TestRetention(t *testing.T) {
	ns := newNamespace(t)
	p := pipeline(ns, "http://127.0.0.1:9/web.git")
	p.Spec.PromotionRetention = 2
	create(t, p)
	create(t, stage(ns, "prod", []string{"web"}, nil))
	for _, name := range []string{"p1", "p2", "p3", "p4"} {
		// Each is refused at once: the release does not exist.
		create(t, askFor(ns, name, "prod", "nope", false))
		waitFinished(t, ns, name, time.Minute)
	}
	NewWithT(t).Eventually(func(g Gomega) []string {
		var names []string
		for _, p := range promotionsOf(g, ns, "prod") {
			names = append(names, p.Name)
		}
		return names
	}, time.Minute).Should(ConsistOf("p3", "p4"))
	// Each deletion of a record leaves an event, on the stage.
	NewWithT(t).Eventually(func(g Gomega) []string { return eventReasons(g, ns, "Stage", "prod") }, time.Minute).
		Should(ContainElement(sreconcile.EventRecordDeleted))
}
