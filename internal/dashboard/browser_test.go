package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/dashboard"
	"github.com/stackyard/stackyard/test/browser"
)

// restartable is a dashboard that a test stops and starts again on the
// same address, as an operator restart does.
type restartable struct {
	addr string
	mu   sync.Mutex
	stop func()
}

func (d *restartable) start(t *testing.T) {
	t.Helper()
	srv, err := dashboard.New(dashboard.Config{
		Reader: mgr.GetClient(), Reviews: mgr.GetClient(), Informers: mgr.GetCache(), RESTConfig: mgr.GetConfig(),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The old server's port may take a moment to be free again.
	deadline := time.Now().Add(10 * time.Second)
	for err = srv.Listen(d.addr); err != nil && time.Now().Before(deadline); err = srv.Listen(d.addr) {
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	d.addr = srv.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	d.mu.Lock()
	d.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dashboard stopped with %v", err)
		}
	}
	d.mu.Unlock()
}

func (d *restartable) shutdown() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stop != nil {
		d.stop()
		d.stop = nil
	}
}

// TestDashboardInBrowser runs test/browser/dashboard.spec.mjs in Debian's
// Chromium against a dashboard on the real API server, for a team of its
// own (team-c), with hooks that change the cluster while the page is open.
func TestDashboardInBrowser(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "team-c"
	g.Expect(seed(ctx, ns)).To(Succeed())
	for _, name := range []string{"site-dev", "site-dev2"} {
		markReady(g, ctx, ns, name)
	}

	dash := &restartable{addr: "127.0.0.1:0"}
	dash.start(t)
	t.Cleanup(dash.shutdown)

	setStage := func(name string, health promotionv1alpha1.StageHealthStatus, msg string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var st promotionv1alpha1.Stage
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &st); err != nil {
				return err
			}
			st.Status.Health = &promotionv1alpha1.StageHealth{Status: health, Message: msg}
			return env.Client.Status().Update(ctx, &st)
		})
	}
	hooks := http.NewServeMux()
	hooks.HandleFunc("POST /degrade", func(w http.ResponseWriter, _ *http.Request) {
		answer(w, setStage("dev2", promotionv1alpha1.Degraded, "Stack site-dev2: boom"))
	})
	hooks.HandleFunc("POST /heal", func(w http.ResponseWriter, _ *http.Request) {
		answer(w, setStage("dev2", promotionv1alpha1.Healthy, ""))
	})
	// The plan: a preview with value diffs, commits and a fired policy
	// rule, as the page's review shows them.
	hooks.HandleFunc("POST /plan", func(w http.ResponseWriter, r *http.Request) {
		answer(w, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var p promotionv1alpha1.Promotion
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: r.URL.Query().Get("promotion")}, &p); err != nil {
				return err
			}
			if err := recordReview(ctx, &p); err != nil {
				return err
			}
			return env.Client.Status().Update(ctx, &p)
		}))
	})
	// A change to the promotion that the open page must take in live.
	hooks.HandleFunc("POST /touch", func(w http.ResponseWriter, r *http.Request) {
		answer(w, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var p promotionv1alpha1.Promotion
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: r.URL.Query().Get("promotion")}, &p); err != nil {
				return err
			}
			p.Status.Message = "waiting for approval (as of " + time.Now().Format(time.RFC3339Nano) + ")"
			return env.Client.Status().Update(ctx, &p)
		}))
	})
	hooks.HandleFunc("POST /restart", func(w http.ResponseWriter, _ *http.Request) {
		dash.shutdown()
		dash.start(t)
		answer(w, nil)
	})
	hookServer := httptest.NewServer(hooks)
	t.Cleanup(hookServer.Close)

	browser.Run(t, "dashboard.spec.mjs", map[string]string{
		"BASE_URL": "http://" + dash.addr, "TOKEN": tokens[ns+"/alice"], "HOOK_URL": hookServer.URL, "NAMESPACE": ns,
		"SCREENSHOT_DIR": t.TempDir(),
	})

	// What the browser did, the API server recorded as alice.
	var approvals promotionv1alpha1.ApprovalList
	g.Expect(env.Client.List(ctx, &approvals, client.InNamespace(ns))).To(Succeed())
	g.Expect(approvals.Items).To(HaveLen(1))
	g.Expect(approvals.Items[0].Spec.User).To(Equal("system:serviceaccount:" + ns + ":alice"))
	g.Expect(approvals.Items[0].Spec.Comment).To(Equal("looks good"))
	var promotions promotionv1alpha1.PromotionList
	g.Expect(env.Client.List(ctx, &promotions, client.InNamespace(ns))).To(Succeed())
	g.Expect(promotions.Items).To(HaveLen(1))
	g.Expect(promotions.Items[0].Spec.Reason).To(Equal("from the browser"))
}

// answer ends a hook: 204, or 500 with the error.
func answer(w http.ResponseWriter, err error) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// decidePlan records what the Promotion controller records once p's
// preview is done and it waits for approval: its preview of site-qa (a
// StackPromotion), then its status.
func decidePlan(ctx context.Context, c client.Client, p *promotionv1alpha1.Promotion) error {
	rec := change.NewStackPromotion(p, "site-qa")
	rec.Preview = &promotionv1alpha1.StackPreview{
		Name: "site-qa", Summary: &promotionv1alpha1.ChangeSummary{Update: 1},
		Changes: []promotionv1alpha1.ResourceChange{{URN: "urn:pulumi:qa::web::test:index:File::page", Op: "update", Properties: []string{"content"}}},
	}
	if err := c.Create(ctx, rec); err != nil {
		return err
	}
	p.Status.Phase = promotionv1alpha1.PromotionPending
	p.Status.PlanDigest = "sha256:" + strings.Repeat("c", 64)
	p.Status.Message = "waiting for approvals: 0 of 1"
	p.Status.Reason = promotionv1alpha1.PromotionReasonAwaitingApproval
	p.Status.Previewed = 1
	return c.Status().Update(ctx, p)
}
