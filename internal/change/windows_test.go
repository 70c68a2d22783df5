package change

import (
	"strings"
	"testing"
	"time"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

func TestWindowsNameTheField(t *testing.T) {
	spec := &promotionv1alpha1.StageSpec{PromotionWindows: []promotionv1alpha1.PromotionWindow{
		{Kind: promotionv1alpha1.Allow, RRule: "FREQ=DAILY", DTStart: at(0), DTEnd: at(time.Hour)},
		{Kind: promotionv1alpha1.Deny, RRule: "FREQ=MONTHLY", DTStart: at(0), DTEnd: at(time.Hour)},
	}}
	_, err := Windows(spec)
	if err == nil || !strings.HasPrefix(err.Error(), "spec.promotionWindows[1].rrule: ") {
		t.Errorf("Windows = %v, want an error naming spec.promotionWindows[1].rrule", err)
	}
	spec.PromotionWindows = spec.PromotionWindows[:1]
	if w, err := Windows(spec); err != nil || len(w) != 1 {
		t.Errorf("Windows = %v, %v", w, err)
	}
}
