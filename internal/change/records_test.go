package change

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// TestStackPromotionName: a record's name is a valid object name for the
// longest promotion and Stack names, and no two pairs share one, even
// where "<promotion>-<stack>" is the same.
func TestStackPromotionName(t *testing.T) {
	long := strings.Repeat("p", 253)
	seen := map[string][2]string{}
	for _, pair := range [][2]string{
		{"a-b", "c"}, {"a", "b-c"}, {"to-prod", "web"}, {long, strings.Repeat("s", 253)}, {long, strings.Repeat("s", 252)},
	} {
		name := StackPromotionName(pair[0], pair[1])
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("StackPromotionName(%.20q, %.20q) = %q: %v", pair[0], pair[1], name, errs)
		}
		if other, ok := seen[name]; ok {
			t.Errorf("%v and %v share the name %q", pair, other, name)
		}
		seen[name] = pair
	}
	if got := StackPromotionName("to-prod", "web"); !strings.HasPrefix(got, "to-prod-web-") {
		t.Errorf("StackPromotionName(to-prod, web) = %q: the names should still be readable", got)
	}
}

// TestIsRecordOf: only an object controlled by the promotion's UID, and
// naming the promotion and the Stack, is its record.
func TestIsRecordOf(t *testing.T) {
	p := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "to-prod", UID: "uid-p"}}
	ours := NewStackPromotion(p, "web")
	if !IsRecordOf(ours, p, "web") {
		t.Fatal("the promotion's own record is not its record")
	}
	for name, mutate := range map[string]func(*promotionv1alpha1.StackPromotion){
		"no controller":                func(r *promotionv1alpha1.StackPromotion) { r.OwnerReferences = nil },
		"another UID":                  func(r *promotionv1alpha1.StackPromotion) { r.OwnerReferences[0].UID = "uid-other" },
		"an owner, not the controller": func(r *promotionv1alpha1.StackPromotion) { r.OwnerReferences[0].Controller = nil },
		"another Stack":                func(r *promotionv1alpha1.StackPromotion) { r.Stack = "db" },
		"another promotion":            func(r *promotionv1alpha1.StackPromotion) { r.Promotion = "to-dev" },
	} {
		rec := ours.DeepCopy()
		mutate(rec)
		if IsRecordOf(rec, p, "web") {
			t.Errorf("%s: taken for the promotion's record", name)
		}
	}
}

// TestPreviews: the previews come in the rollout's order where it has
// one, the others after it by name; records without a preview are left
// out.
func TestPreviews(t *testing.T) {
	p := &promotionv1alpha1.Promotion{}
	p.Status.Stacks = []promotionv1alpha1.PromotedStack{{Name: "web"}, {Name: "db"}}
	recs := []promotionv1alpha1.StackPromotion{
		{Stack: "zeta", Preview: &promotionv1alpha1.StackPreview{Name: "zeta"}},
		{Stack: "db", Preview: &promotionv1alpha1.StackPreview{Name: "db"}},
		{Stack: "empty"},
		{Stack: "alpha", Preview: &promotionv1alpha1.StackPreview{Name: "alpha"}},
		{Stack: "web", Preview: &promotionv1alpha1.StackPreview{Name: "web"}},
	}
	var got []string
	for _, pv := range Previews(p, recs) {
		got = append(got, pv.Name)
	}
	if want := "web db alpha zeta"; strings.Join(got, " ") != want {
		t.Errorf("Previews = %v, want %s", got, want)
	}
}
