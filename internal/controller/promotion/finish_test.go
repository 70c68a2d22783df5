package promotion

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// TestFinishWritesNothingFromAStaleCopy: a reconcile that found its copy
// of the Promotion, or of a record, older than the one stored (a
// preview's maker check) writes nothing, neither the records nor the
// status, and looks again soon. A write from it would put back its older
// record, throwing away the record of the preview just made, which the
// next reconcile would then delete as nobody's (seen in an audit of the
// promotion benchmark). One that is current stores the record first, then
// the status that counts it.
func TestFinishWritesNothingFromAStaleCopy(t *testing.T) {
	f := newVerifyFixture(t, promotionv1alpha1.Verification{})
	ctx := context.Background()
	for _, stale := range []bool{true, false} {
		patcher := sreconcile.NewPatcher(f.r.Client, f.p)
		s := &session{r: f.r, p: f.p, now: f.clock.now, stale: stale, recs: records{
			loaded:   map[string]*promotionv1alpha1.StackPromotion{},
			previews: []promotionv1alpha1.StackPreview{{Name: "qa", Update: "qa-r2-qa", Round: 1}},
		}}
		res, err := s.finish(ctx, patcher, sreconcile.ResultEmpty, nil)
		if err != nil {
			t.Fatal(err)
		}
		stored := &promotionv1alpha1.Promotion{}
		if err := f.r.Client.Get(ctx, client.ObjectKeyFromObject(f.p), stored); err != nil {
			t.Fatal(err)
		}
		if written := stored.Status.Previewing > 0; written == stale {
			t.Errorf("stale %v: the status was written: %v", stale, written)
		}
		rec, err := change.StackRecord(ctx, f.r.Client, stored, "qa")
		if err != nil {
			t.Fatal(err)
		}
		if written := rec != nil; written == stale {
			t.Errorf("stale %v: the record was written: %v", stale, written)
		}
		if stale && res.RequeueAfter != cacheLag {
			t.Errorf("a stale reconcile looks again after %v, want %v", res.RequeueAfter, cacheLag)
		}
	}
}

// TestPreviewMakesNothingFromAStaleCopy: a reconcile whose Promotion is
// older than the one stored makes no preview object, since, stale, it
// would record none (finish writes nothing) and the next reconcile would
// delete them as nobody's.
func TestPreviewMakesNothingFromAStaleCopy(t *testing.T) {
	f := newVerifyFixture(t, promotionv1alpha1.Verification{})
	ctx := context.Background()
	stale := f.p.DeepCopy()
	f.p.Status.Message = "written since"
	if err := f.r.Client.Status().Update(ctx, f.p); err != nil {
		t.Fatal(err)
	}
	s := &session{r: f.r, p: stale, now: f.clock.now, stage: f.stage}
	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: f.p.Namespace, Name: "qa"}}
	_, err := s.runPreview(ctx, stack, &promotionv1alpha1.StackPreview{Name: "qa"})
	// The fixture's scheme knows no Workspace: had runPreview gone on to
	// make one, it would have failed otherwise than with this wait.
	var w *sreconcile.Waiting
	if !errors.As(err, &w) || !s.stale || !strings.Contains(err.Error(), "older than the one stored") {
		t.Fatalf("runPreview on a stale copy = %v, stale %v; want a wait for the cache, stale", err, s.stale)
	}
}
