package stage

import (
	"strings"
	"testing"
	"time"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

func TestAutoPromotionName(t *testing.T) {
	cur := &promotionv1alpha1.StageRelease{Name: "r1", Promotion: "qa-1", Since: at(0)}
	a, b := AutoPromotionName("qa", "r2", cur), AutoPromotionName("qa", "r2", cur.DeepCopy())
	if a != b || !strings.HasPrefix(a, "qa-") {
		t.Errorf("the same move has names %q and %q", a, b)
	}
	later := cur.DeepCopy()
	later.Since = at(time.Hour)
	if AutoPromotionName("qa", "r2", later) == a || AutoPromotionName("qa", "r3", cur) == a || AutoPromotionName("qa", "r2", nil) == a {
		t.Error("different moves share a name")
	}
}
