package stage

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

func TestHistoryOutlivesPromotions(t *testing.T) {
	succeeded := func(name, release string, end time.Duration, rollback bool) promotionv1alpha1.Promotion {
		p := promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: promotionv1alpha1.PromotionSpec{Stage: "qa", Release: release, Rollback: rollback}}
		p.Status.Phase, p.Status.Commit, p.Status.EndTime = promotionv1alpha1.PromotionSucceeded, release+"-sha", ptr(at(end))
		return p
	}
	failed := succeeded("qa-failed", "r3", 3*time.Hour, false)
	failed.Status.Phase = promotionv1alpha1.PromotionFailed
	recorded := []promotionv1alpha1.StageRelease{{Name: "r0", Since: at(-time.Hour), Promotion: "qa-deleted"}}
	got := history(recorded, []promotionv1alpha1.Promotion{
		succeeded("qa-1", "r1", time.Hour, false), succeeded("qa-2", "r0", 2*time.Hour, true), failed,
	}, []promotionv1alpha1.Release{release("r1", 0, nil)})
	var names []string
	for _, h := range got {
		names = append(names, h.Promotion)
	}
	if strings.Join(names, " ") != "qa-2 qa-1 qa-deleted" {
		t.Fatalf("history = %v", names)
	}
	if !got[0].Rollback || got[1].Rollback || got[1].SHA != "r1-sha" {
		t.Errorf("history entries = %+v", got)
	}
	var many []promotionv1alpha1.Promotion
	for i := range 30 {
		many = append(many, succeeded("p"+string(rune('a'+i)), "r1", time.Duration(i)*time.Minute, false))
	}
	if n := len(history(nil, many, nil)); n != MaxHistory {
		t.Errorf("history kept %d entries, want %d", n, MaxHistory)
	}
}
