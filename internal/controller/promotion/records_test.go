package promotion

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
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

// TestRecordsNotStored: a record the API server does not take for a while
// leaves the promotion's status as it was but for the error, which the
// user reads in status.message: the steps' changes, which count and
// digest the records, are not stored ahead of them.
func TestRecordsNotStored(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := promotionv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	p := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "to-prod", UID: "uid-p"}}
	p.Status.Phase = promotionv1alpha1.PromotionPending
	p.Status.Message = "previewing"
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).WithObjects(p).WithStatusSubresource(p).
		WithIndex(&promotionv1alpha1.StackPromotion{}, change.RecordPromotionIndex, change.RecordPromotion).Build(),
		interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*promotionv1alpha1.StackPromotion); ok {
				return apierrors.NewServiceUnavailable("etcd is busy")
			}
			return c.Create(ctx, obj, opts...)
		}})
	read := &promotionv1alpha1.Promotion{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), read); err != nil {
		t.Fatal(err)
	}
	s := &session{r: &Reconciler{Client: c, APIReader: c}, p: read, read: read.DeepCopy()}
	patcher := sreconcile.NewPatcher(c, read)
	if err := s.loadRecords(ctx); err != nil {
		t.Fatal(err)
	}
	// A step previewed web and moved on: neither may be stored without
	// web's record.
	s.recs.previews = []promotionv1alpha1.StackPreview{{Name: "web", Update: "to-prod-web", Round: 1}}
	read.Status.PlanDigest = "sha256:moved-on"

	if _, err := s.finish(ctx, patcher, sreconcile.ResultSuccess, nil); err == nil {
		t.Error("finish returned no error: the record is not stored and nothing retries it")
	}
	stored := &promotionv1alpha1.Promotion{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), stored); err != nil {
		t.Fatal(err)
	}
	if msg := stored.Status.Message; !strings.Contains(msg, "creating the record of Stack web") || !strings.Contains(msg, "etcd is busy") {
		t.Errorf("status.message %q does not say the record could not be stored", msg)
	}
	if stored.Status.PlanDigest != "" {
		t.Errorf("status.planDigest %q stored ahead of the record it digests", stored.Status.PlanDigest)
	}
	if stored.Status.Phase != promotionv1alpha1.PromotionPending {
		t.Errorf("phase %q, want Pending", stored.Status.Phase)
	}
}
