package stackrun

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// TestPreviewRecords decides, for what may already exist under a
// preview's names, whether it is the preview's: only what the maker
// recorded, by UID. One that claims the maker but is not recorded is
// deleted, to be made anew; one that does not fails the preview. The
// decisions are the preview's own logic: the client is a fake.
func TestPreviewRecords(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{autov1alpha1.AddToScheme, pulumiv1.AddToScheme, promotionv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	maker := &promotionv1alpha1.Promotion{
		TypeMeta:   metav1.TypeMeta{APIVersion: promotionv1alpha1.GroupVersion.String(), Kind: "Promotion"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "to-prod", UID: "uid-promotion"},
	}
	stack := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", UID: "uid-stack"},
		Spec:       shared.StackSpec{Stack: "org/web/prod", GitSource: &shared.GitSource{ProjectRepo: "https://git.example/web.git", Commit: strings.Repeat("a", 40)}},
	}
	claiming := []metav1.OwnerReference{{APIVersion: promotionv1alpha1.GroupVersion.String(), Kind: "Promotion", Name: maker.Name,
		UID: maker.UID, Controller: ptr.To(true)}}
	workspace := func(uid string, owners []metav1.OwnerReference) *autov1alpha1.Workspace {
		return &autov1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "to-prod-web-1", UID: types.UID("uid-" + uid), OwnerReferences: owners}}
	}
	for _, tt := range []struct {
		name     string
		existing client.Object // made before Run, under the Workspace's name
		recorded promotionv1alpha1.PreviewRecord
		// deleted: existing is deleted; made: Run made both objects;
		// failure: the preview fails, saying so.
		deleted, made bool
		failure       string
		// stale: the maker in hand is older than the live one (its
		// record may name existing): Run waits and deletes nothing.
		stale bool
	}{
		{name: "nothing yet", made: true},
		{name: "the recorded Workspace", existing: workspace("mine", claiming), recorded: promotionv1alpha1.PreviewRecord{Workspace: "uid-mine"}, made: true},
		{name: "claims the promotion, not recorded", existing: workspace("planted", claiming), deleted: true},
		{name: "claims the promotion, another recorded", existing: workspace("planted", claiming),
			recorded: promotionv1alpha1.PreviewRecord{Workspace: "uid-mine"}, deleted: true},
		{name: "claims the promotion, not in a stale copy of the record", existing: workspace("mine", claiming), stale: true},
		{name: "someone else's", existing: workspace("theirs", nil),
			failure: "Workspace to-prod-web-1, where the preview of Stack web runs, exists and does not belong to the promotion"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(maker, stack).WithStatusSubresource(maker)
			if tt.existing != nil {
				b = b.WithObjects(tt.existing)
			}
			c := b.Build()
			// The maker in hand is the one stored, or, when stale, a
			// copy read before its last write.
			inHand := &promotionv1alpha1.Promotion{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(maker), inHand); err != nil {
				t.Fatal(err)
			}
			if tt.stale {
				live := inHand.DeepCopy()
				live.Status.Message = "recorded"
				if err := c.Status().Update(context.Background(), live); err != nil {
					t.Fatal(err)
				}
			}
			p := &Preview{Client: c, APIReader: c, Maker: inHand, Kind: "promotion", Stack: stack, Commit: strings.Repeat("b", 40),
				Name: "to-prod-web-1", Update: "to-prod-web-1", Recorded: tt.recorded, Trigger: "PromotionPreview", MaxAttempts: 3}
			st, err := p.Run(context.Background())
			if p.MakerStale != tt.stale {
				t.Errorf("MakerStale = %v, want %v: the caller must write nothing from a stale maker", p.MakerStale, tt.stale)
			}
			if tt.stale {
				var waiting *sreconcile.Waiting
				if !errors.As(err, &waiting) {
					t.Fatalf("Run = %+v, %v; want a wait for a fresh copy of the record", st, err)
				}
				if err := c.Get(context.Background(), client.ObjectKeyFromObject(tt.existing), &autov1alpha1.Workspace{}); err != nil {
					t.Fatalf("the Workspace a stale record does not name was deleted: %v", err)
				}
				return
			}
			if tt.deleted {
				var waiting *sreconcile.Waiting
				if !errors.As(err, &waiting) {
					t.Fatalf("Run = %+v, %v; want a wait while the unrecorded Workspace goes", st, err)
				}
				if err := c.Get(context.Background(), client.ObjectKeyFromObject(tt.existing), &autov1alpha1.Workspace{}); !apierrors.IsNotFound(err) {
					t.Fatalf("the unrecorded Workspace is still there: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.Failure != tt.failure {
				t.Fatalf("failure %q, want %q", st.Failure, tt.failure)
			}
			if !tt.made {
				return
			}
			var ws autov1alpha1.Workspace
			var upd autov1alpha1.Update
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "apps", Name: "to-prod-web-1"}, &ws); err != nil {
				t.Fatal(err)
			}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "apps", Name: "to-prod-web-1"}, &upd); err != nil {
				t.Fatal(err)
			}
			if st.Recorded.Workspace != ws.UID || st.Recorded.Update != upd.UID {
				t.Fatalf("recorded %+v, want the UIDs of workspace %s and update %s", st.Recorded, ws.UID, upd.UID)
			}
			if !metav1.IsControlledBy(&upd, maker) || upd.Spec.Type != autov1alpha1.PreviewType || !ptr.Deref(upd.Spec.SavePlan, false) {
				t.Fatalf("the Update is not the promotion's preview that saves its plan: %+v", upd)
			}
			if _, ok := upd.Labels[StackNameLabel]; ok {
				t.Fatal("the preview's Update carries the Stack's own label")
			}
		})
	}
}
