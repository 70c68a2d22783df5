package alert

import (
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/notify"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

func TestFactsAndFilters(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }
	end := at(3 * time.Minute)
	objs := &namespaceObjects{TimelineObjects: change.TimelineObjects{
		Stages: []promotionv1alpha1.Stage{{ObjectMeta: metav1.ObjectMeta{Name: "prod"},
			Spec: promotionv1alpha1.StageSpec{Pipeline: "web", Stacks: []promotionv1alpha1.StackBinding{{Name: "web-prod"}}}}},
		Promotions: []promotionv1alpha1.Promotion{{
			ObjectMeta: metav1.ObjectMeta{Name: "back", UID: "p1", CreationTimestamp: at(time.Minute)},
			Spec:       promotionv1alpha1.PromotionSpec{Stage: "prod", Release: "r0", Rollback: true},
			Status:     promotionv1alpha1.PromotionStatus{Phase: promotionv1alpha1.PromotionSucceeded, EndTime: &end},
		}},
		Stacks: []pulumiv1.Stack{
			{ObjectMeta: metav1.ObjectMeta{Name: "web-prod", UID: "s1", Generation: 4}},
			{ObjectMeta: metav1.ObjectMeta{Name: "loose", UID: "s2", Generation: 1}},
		},
	}}
	for i := range objs.Stacks {
		sreconcile.MarkStalled(&objs.Stacks[i].Status.Conditions, objs.Stacks[i].Generation, "SpecInvalid", "bad")
	}
	all := facts(objs, "")
	var keys []string
	for _, f := range all {
		keys = append(keys, f.event.Key)
	}
	g.Expect(keys).To(ConsistOf("promotion/p1/Succeeded", "promotion/p1/RolledBack", "stack/s1/stalled/4", "stack/s2/stalled/1"))

	// A rollout that halted is a fact of its own, one per halt, with who
	// halted it.
	halted := objs.Promotions[0]
	halted.UID, halted.Spec.Rollback = "p2", false
	halted.Status = promotionv1alpha1.PromotionStatus{Phase: promotionv1alpha1.PromotionRunning, Rollout: &promotionv1alpha1.RolloutStatus{
		Halts: []promotionv1alpha1.RolloutHalt{{Time: at(2 * time.Minute), Reason: "halted by ada: the quota", By: "ada"}},
	}}
	withHalt := *objs
	withHalt.Promotions = append([]promotionv1alpha1.Promotion{halted}, objs.Promotions...)
	var haltFacts []fact
	for _, f := range facts(&withHalt, "") {
		if f.event.Type == string(notificationv1alpha1.EventRolloutHalted) {
			haltFacts = append(haltFacts, f)
		}
	}
	g.Expect(haltFacts).To(HaveLen(1))
	g.Expect(haltFacts[0].event.Key).To(Equal("promotion/p2/halted/1"))
	g.Expect(haltFacts[0].event.Title()).To(Equal("Rollout of r0 into prod halted"))

	a := &notificationv1alpha1.Alert{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0)}, Spec: notificationv1alpha1.AlertSpec{
		Events: []notificationv1alpha1.EventType{notificationv1alpha1.EventRolledBack, notificationv1alpha1.EventStackStalled},
		Stages: []string{"prod"},
	}}
	keysOf := func(fs []fact) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.event.Key)
		}
		return out
	}
	g.Expect(keysOf(pending(a, notificationv1alpha1.ProviderSlack, all))).To(ConsistOf("promotion/p1/RolledBack", "stack/s1/stalled/4"),
		"the stage filter leaves out the Stack no stage binds")
	g.Expect(keysOf(pending(a, notificationv1alpha1.ProviderGitHub, all))).To(ConsistOf("promotion/p1/RolledBack"))

	a.Status.Delivered = []notificationv1alpha1.DeliveredEvent{{Key: "promotion/p1/RolledBack"}}
	g.Expect(keysOf(pending(a, notificationv1alpha1.ProviderSlack, all))).To(ConsistOf("stack/s1/stalled/4"))
	a.CreationTimestamp = metav1.NewTime(time.Now().Add(time.Hour))
	g.Expect(pending(a, notificationv1alpha1.ProviderSlack, all)).To(BeEmpty(), "an event older than the Alert is sent")
}

func TestRememberKeepsTheLastAndMovesTheWatermark(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var st notificationv1alpha1.AlertStatus
	for i := range notificationv1alpha1.MaxDeliveredKeys + 2 {
		remember(&st, &notify.Event{Key: strconv.Itoa(i), Time: t0.Add(time.Duration(i) * time.Second)}, t0)
	}
	g.Expect(st.Delivered).To(HaveLen(notificationv1alpha1.MaxDeliveredKeys))
	g.Expect(st.Delivered[0].Key).To(Equal("2"))
	g.Expect(st.Watermark.Time).To(Equal(t0.Add(time.Second)))
	g.Expect(st.DeliveredCount).To(Equal(int64(notificationv1alpha1.MaxDeliveredKeys + 2)))

	a := &notificationv1alpha1.Alert{Spec: notificationv1alpha1.AlertSpec{Events: []notificationv1alpha1.EventType{notificationv1alpha1.EventReleaseDiscovered}}, Status: st}
	old := fact{typ: notificationv1alpha1.EventReleaseDiscovered, event: notify.Event{Key: "1", Time: t0.Add(time.Second)}}
	g.Expect(pending(a, notificationv1alpha1.ProviderWebhook, []fact{old})).To(BeEmpty(), "an event forgotten under the watermark is sent again")
}
