package dashboard_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/dashboard"
)

// TestPromotionPageAheadOfTheCache: the promote action sends the browser
// to the new promotion's page at once, before the cache may hold it. The
// page asks the API server then, instead of answering 404. The cache here
// lags for good: it never finds the promotion.
func TestPromotionPageAheadOfTheCache(t *testing.T) {
	ctx := context.Background()
	p := &promotionv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, GenerateName: "qa-lag-"},
		Spec: promotionv1alpha1.PromotionSpec{
			Stage: "qa", Release: "web-bbbbbbb", RequestedBy: "system:serviceaccount:" + nsA + ":alice", Reason: "lag",
		},
	}
	if err := asUser(t, tokens[nsA+"/alice"]).Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	lagging := laggingCache{Client: mgr.GetClient(), missing: p.Name}
	srv, err := dashboard.New(dashboard.Config{Reader: lagging, Reviews: mgr.GetClient(), RESTConfig: mgr.GetConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	srvCtx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go func() { _ = srv.Start(srvCtx) }()
	base := "http://" + srv.Addr().String()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body, _ := get(t, base, "/promotions/"+nsA+"/"+p.Name, tokens["bob"])
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the promotion page answered %d:\n%s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// laggingCache is a cached client that has not seen the promotion missing
// yet.
type laggingCache struct {
	client.Client
	missing string
}

func (c laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*promotionv1alpha1.Promotion); ok && key.Name == c.missing {
		return apierrors.NewNotFound(promotionv1alpha1.GroupVersion.WithResource("promotions").GroupResource(), key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}
