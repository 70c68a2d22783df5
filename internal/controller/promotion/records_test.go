package promotion

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/change"
)

// recordsWorld is a Running promotion to-prod and a client holding recs.
func recordsWorld(t *testing.T, recs ...*promotionv1alpha1.StackPromotion) (*session, *promotionv1alpha1.Promotion) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := promotionv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(scheme).
		WithIndex(&promotionv1alpha1.StackPromotion{}, change.RecordPromotionIndex, change.RecordPromotion)
	for _, rec := range recs {
		b = b.WithObjects(rec)
	}
	c := b.Build()
	p := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "to-prod", UID: "uid-p"}}
	p.Status.Phase = promotionv1alpha1.PromotionRunning
	return &session{r: &Reconciler{Client: c, APIReader: c}, p: p}, p
}

// TestPinOf: a running promotion pins a Stack only with the plan its
// record holds, read live; a promotion made before records pins from its
// status.previews; without either it pins nothing and says why.
func TestPinOf(t *testing.T) {
	ctx := context.Background()
	owner := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "to-prod", UID: "uid-p"}}
	rec := change.NewStackPromotion(owner, "web")
	rec.Preview = &promotionv1alpha1.StackPreview{Name: "web", Plan: "to-prod-web.plan"}

	s, _ := recordsWorld(t, rec)
	if plan, _, err := s.pinOf(ctx, "web"); err != nil || plan != "to-prod-web.plan" {
		t.Errorf("with a record: pinOf = %q, %v", plan, err)
	}
	if _, _, err := s.pinOf(ctx, "db"); err == nil || !strings.Contains(err.Error(), "has no record of the plan its preview of Stack db saved") {
		t.Errorf("without a record: pinOf error %v", err)
	}

	s, p := recordsWorld(t)
	p.Status.Previews = []promotionv1alpha1.StackPreview{{Name: "web", Plan: "legacy.plan"}}
	if plan, _, err := s.pinOf(ctx, "web"); err != nil || plan != "legacy.plan" {
		t.Errorf("a promotion from before records: pinOf = %q, %v", plan, err)
	}

	foreign := rec.DeepCopy()
	foreign.OwnerReferences = nil
	s, _ = recordsWorld(t, foreign)
	if _, _, err := s.pinOf(ctx, "web"); err == nil {
		t.Error("a record the promotion does not control gave a plan")
	}
}

// TestLoadRecordsMovesLegacyPreviews: a Pending promotion made before
// records moves its status.previews into records: they are its previews,
// and its status drops them (stored after the records).
func TestLoadRecordsMovesLegacyPreviews(t *testing.T) {
	s, p := recordsWorld(t)
	p.Status.Phase = promotionv1alpha1.PromotionPending
	p.Status.Previews = []promotionv1alpha1.StackPreview{{Name: "web", Update: "to-prod-web", Round: 1}}
	if err := s.loadRecords(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(s.recs.previews) != 1 || s.recs.previews[0].Update != "to-prod-web" || p.Status.Previews != nil {
		t.Errorf("previews %+v, status.previews %+v", s.recs.previews, p.Status.Previews)
	}
}

// TestPredecessors: the record of an earlier promotion of the same name,
// or one being deleted, is waited for; anyone else's object is not.
func TestPredecessors(t *testing.T) {
	p := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "to-prod", UID: "uid-new"}}
	earlier := p.DeepCopy()
	earlier.UID = "uid-old"
	now := metav1.Now()
	for name, tt := range map[string]struct {
		rec  *promotionv1alpha1.StackPromotion
		want bool
	}{
		"an earlier promotion's": {change.NewStackPromotion(earlier, "web"), true},
		"another promotion's": {func() *promotionv1alpha1.StackPromotion {
			other := earlier.DeepCopy()
			other.Name = "to-dev"
			return change.NewStackPromotion(other, "web")
		}(), false},
		"no owner":      {&promotionv1alpha1.StackPromotion{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, false},
		"being deleted": {&promotionv1alpha1.StackPromotion{ObjectMeta: metav1.ObjectMeta{Name: "x", DeletionTimestamp: &now}}, true},
	} {
		if got := predecessors(tt.rec, p); got != tt.want {
			t.Errorf("%s: predecessors = %v, want %v", name, got, tt.want)
		}
	}
}
