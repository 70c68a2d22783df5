package cloudapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/cloudapi"
	"github.com/stackyard/stackyard/test/testenv"
)

const (
	shaA = "1111111111111111111111111111111111111111"
	shaB = "2222222222222222222222222222222222222222"
)

// The Kargo AnalysisTemplates' success conditions, as Argo Rollouts expr
// expressions over the web provider's result (the whole JSON body). The
// functions below read exactly these paths of the decoded answer.
const (
	updateCondition = `result.updates[0].result == "succeeded" && result.updates[0].kind == "update" && ` +
		`result.updates[0].environment["git.head"] == "<sha>"`
	previewCondition = `result.updates[len(result.updates)-1].info.result == "succeeded" && ` +
		`result.updates[len(result.updates)-1].info.kind == "Pupdate" && ` +
		`result.updates[len(result.updates)-1].info.environment["git.head"] == "<sha>"`
)

// at walks decoded JSON as an expr expression does: a string indexes an
// object, an int a list. A step that does not apply fails the test, as it
// makes the expression fail.
func at(t *testing.T, v any, steps ...any) any {
	t.Helper()
	for _, step := range steps {
		switch s := step.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("[%q] of %T", s, v)
			}
			v = m[s]
		case int:
			l, ok := v.([]any)
			if !ok || s < 0 || s >= len(l) {
				t.Fatalf("[%d] of %#v", s, v)
			}
			v = l[s]
		}
	}
	return v
}

// updateSucceeded evaluates updateCondition.
func updateSucceeded(t *testing.T, result any, sha string) bool {
	t.Helper()
	return at(t, result, "updates", 0, "result") == "succeeded" &&
		at(t, result, "updates", 0, "kind") == "update" &&
		at(t, result, "updates", 0, "environment", "git.head") == sha
}

// previewSucceeded evaluates previewCondition.
func previewSucceeded(t *testing.T, result any, sha string) bool {
	t.Helper()
	last := len(at(t, result, "updates").([]any)) - 1
	return at(t, result, "updates", last, "info", "result") == "succeeded" &&
		at(t, result, "updates", last, "info", "kind") == "Pupdate" &&
		at(t, result, "updates", last, "info", "environment", "git.head") == sha
}

// t0 is when the histories written by the test start.
var t0 = metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))

func after(s int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(s) * time.Second)) }

func record(name string, typ autov1alpha1.UpdateType, state shared.StackUpdateStateMessage, commit string, s int) shared.UpdateRecord {
	return shared.UpdateRecord{
		Name: name, Type: typ, State: state, Commit: commit, StartTime: after(s), EndTime: after(s + 10),
		Changes: map[string]int64{"same": 3},
	}
}

// TestCloudAPI serves the handler on loopback, as the operator's
// ServiceAccount bound to the packaged ClusterRole alone, and asks it what
// Kargo's AnalysisTemplates ask, with ServiceAccount tokens from the
// TokenRequest API.
func TestCloudAPI(t *testing.T) {
	env, err := testenv.Start(testenv.Options{AddToScheme: []func(*k8sruntime.Scheme) error{
		pulumiv1.AddToScheme, autov1alpha1.AddToScheme,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := env.Client
	admin := kubernetes.NewForConfigOrDie(env.Config)

	// The server, as the operator runs it.
	opCfg, err := env.ServiceAccountConfig(ctx, "stackyard-system", "stackyard", testenv.OperatorRoles()...)
	if err != nil {
		t.Fatal(err)
	}
	// It reads Stacks and Updates from an informer cache with the cloud
	// API's index, as in the operator's manager.
	informers, err := cache.New(opCfg, cache.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := cloudapi.SetupIndexes(ctx, informers); err != nil {
		t.Fatal(err)
	}
	go func() { _ = informers.Start(ctx) }()
	direct, err := client.NewWithWatch(opCfg, client.Options{Scheme: env.Scheme, Cache: &client.CacheOptions{Reader: informers}})
	if err != nil {
		t.Fatal(err)
	}
	// The reviews it makes are counted on their way to the API server.
	var tokenReviews, accessReviews atomic.Int64
	opClient := interceptor.NewClient(direct, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			switch obj.(type) {
			case *authenticationv1.TokenReview:
				tokenReviews.Add(1)
			case *authorizationv1.SubjectAccessReview:
				accessReviews.Add(1)
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	logs := &testenv.SyncBuffer{}
	log := funcr.New(func(prefix, args string) { fmt.Fprintln(logs, prefix, args) }, funcr.Options{Verbosity: 2})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srvCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cloudapi.NewServer(ln, cloudapi.NewHandler(opClient, log)).Start(srvCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	base := "http://" + ln.Addr().String() + "/api/stacks/"

	// Two namespaces deploy acme/website/dev; ns also has qa, with an update
	// running.
	ns, other := env.NewNamespace(t, "kargo-"), env.NewNamespace(t, "team-")
	devHistory := []shared.UpdateRecord{
		record("dev-up-3", autov1alpha1.UpType, shared.SucceededStackStateMessage, shaB, 200),
		record("dev-up-1", autov1alpha1.UpType, shared.SucceededStackStateMessage, shaA, 0),
	}
	previewHistory := []shared.UpdateRecord{
		record("dev-pre-4", autov1alpha1.PreviewType, shared.SucceededStackStateMessage, shaB, 300),
		record("dev-pre-2", autov1alpha1.PreviewType, shared.FailedStackStateMessage, shaB, 100),
	}
	website := &shared.ProjectInfo{Name: "website", Runtime: "yaml"}
	writeStack(ctx, t, c, ns, "dev", shared.StackSpec{Stack: "acme/website/dev"}, pulumiv1.StackStatus{History: devHistory})
	writeStack(ctx, t, c, ns, "dev-preview", shared.StackSpec{Stack: "acme/website/dev", Preview: true},
		pulumiv1.StackStatus{History: previewHistory})
	writeStack(ctx, t, c, other, "dev", shared.StackSpec{Stack: "acme/website/dev"}, pulumiv1.StackStatus{
		History: []shared.UpdateRecord{record("other-up-1", autov1alpha1.UpType, shared.FailedStackStateMessage, shaA, 0)},
	})
	running := &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "qa-up-2"},
		Spec:       autov1alpha1.UpdateSpec{WorkspaceName: "qa", StackName: "qa", Type: autov1alpha1.UpType},
	}
	if err := c.Create(ctx, running); err != nil {
		t.Fatal(err)
	}
	running.Status.StartTime = after(400)
	if err := c.Status().Update(ctx, running); err != nil {
		t.Fatal(err)
	}
	writeStack(ctx, t, c, ns, "qa", shared.StackSpec{Stack: "qa"}, pulumiv1.StackStatus{
		ProjectInfo:   website,
		History:       []shared.UpdateRecord{record("qa-up-1", autov1alpha1.UpType, shared.SucceededStackStateMessage, shaA, 0)},
		CurrentUpdate: &shared.CurrentStackUpdate{Name: "qa-up-2", Commit: shaB},
	})

	// kargo may get the Stacks of ns, auditor those of every namespace,
	// nobody none.
	for _, sa := range []string{"kargo", "auditor", "nobody"} {
		if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}); err != nil {
			t.Fatal(err)
		}
	}
	readStacks := []rbacv1.PolicyRule{{APIGroups: []string{"pulumi.com"}, Resources: []string{"stacks"}, Verbs: []string{"get"}}}
	for _, obj := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stack-reader"}, Rules: readStacks},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kargo-stack-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "stack-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "kargo"}},
		},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-stack-reader"}, Rules: readStacks},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-auditor"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ns + "-stack-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "auditor"}},
		},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	token := func(sa string) string {
		t.Helper()
		tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("TokenRequest: %v", err)
		}
		return tr.Status.Token
	}
	kargo, auditor, nobody := token("kargo"), token("auditor"), token("nobody")
	// The cache has seen the four Stacks, the qa Stack's status last.
	waitCached := func() error {
		var qa pulumiv1.Stack
		if err := opClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "qa"}, &qa); err != nil || qa.Status.CurrentUpdate == nil {
			return fmt.Errorf("the qa Stack's status is not in the cache yet (%v)", err)
		}
		return nil
	}
	for deadline := time.Now().Add(10 * time.Second); waitCached() != nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(waitCached())
		}
	}
	allTokens := []string{kargo, auditor, nobody}

	// get asks as Kargo's web provider does; the RBAC authoriser learns of
	// new bindings through an informer, so a 403 is retried for a while
	// when 200 is expected.
	get := func(t *testing.T, path, authorization string, want int) any {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept", "application/vnd.pulumi+8")
			if authorization != "" {
				req.Header.Set("Authorization", authorization)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode == http.StatusForbidden && want != http.StatusForbidden && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			if resp.StatusCode != want {
				t.Fatalf("GET %s: %d %s, want %d", path, resp.StatusCode, body, want)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			for _, tok := range allTokens {
				if strings.Contains(string(body), tok) {
					t.Fatalf("GET %s: the answer holds a token", path)
				}
			}
			var v any
			if err := json.Unmarshal(body, &v); err != nil {
				t.Fatalf("GET %s: %v: %s", path, err, body)
			}
			return v
		}
	}

	t.Run("updates answers the update template", func(t *testing.T) {
		for _, auth := range []string{"token " + kargo, "Bearer " + kargo} {
			result := get(t, "acme/website/dev/updates?pageSize=1&page=1", auth, http.StatusOK)
			t.Logf("%s\n  on %v", updateCondition, result)
			if !updateSucceeded(t, result, shaB) {
				t.Errorf("the update condition is false for %s", shaB)
			}
			if updateSucceeded(t, result, shaA) {
				t.Errorf("the update condition is true for %s, an older commit", shaA)
			}
			if n := len(at(t, result, "updates").([]any)); n != 1 {
				t.Errorf("pageSize=1 gave %d updates", n)
			}
		}
		// Unpaginated: every update of both Stacks, newest first, no
		// previews.
		all := at(t, get(t, "acme/website/dev/updates", "token "+kargo, http.StatusOK), "updates").([]any)
		if len(all) != 2 || at(t, all, 1, "environment", "git.head") != shaA {
			t.Errorf("updates = %v, want dev-up-3 then dev-up-1", all)
		}
		service := get(t, "acme/website/dev/updates?output-type=service&pageSize=1", "token "+kargo, http.StatusOK)
		if at(t, service, "updates", 0, "updateID") != "dev-up-3" || at(t, service, "total") != float64(2) {
			t.Errorf("service shape = %v", service)
		}
	})

	t.Run("previews answers the preview template", func(t *testing.T) {
		result := get(t, "acme/website/dev/updates/latest/previews", "token "+kargo, http.StatusOK)
		t.Logf("%s\n  on %v", previewCondition, result)
		if !previewSucceeded(t, result, shaB) {
			t.Errorf("the preview condition is false for %s", shaB)
		}
		// Only the previews since the last update (dev-up-3) are listed.
		if at(t, result, "total") != float64(1) || at(t, result, "updates", 0, "updateID") != "dev-pre-4" {
			t.Errorf("previews = %v, want dev-pre-4 alone", result)
		}
	})

	t.Run("a running update fails the update template", func(t *testing.T) {
		result := get(t, "acme/website/qa/updates?pageSize=1", "Bearer "+kargo, http.StatusOK)
		if at(t, result, "updates", 0, "result") != "in-progress" || updateSucceeded(t, result, shaB) {
			t.Errorf("updates = %v, want the running update first", result)
		}
		if got, want := at(t, result, "updates", 0, "startTime"), float64(after(400).Unix()); got != want {
			t.Errorf("startTime = %v, want %v (from the Update)", got, want)
		}
	})

	t.Run("bad tokens are 401", func(t *testing.T) {
		for _, auth := range []string{"", "token not-a-token", "Bearer not-a-token", "Basic " + kargo, "token"} {
			result := get(t, "acme/website/dev/updates?pageSize=1", auth, http.StatusUnauthorized)
			if at(t, result, "code") != float64(401) {
				t.Errorf("%q: body %v", auth, result)
			}
		}
	})

	t.Run("no right to get the Stack is 403", func(t *testing.T) {
		get(t, "acme/website/dev/updates?pageSize=1", "token "+nobody, http.StatusForbidden)
		get(t, "acme/website/dev/updates/latest/previews", "Bearer "+nobody, http.StatusForbidden)
		get(t, "acme/website/dev/updates?namespace="+other, "token "+kargo, http.StatusForbidden)
	})

	t.Run("no such stack is 404", func(t *testing.T) {
		get(t, "acme/website/prod/updates", "token "+kargo, http.StatusNotFound)
		get(t, "acme/shop/qa/updates", "token "+kargo, http.StatusNotFound) // qa's project is website
		get(t, "acme/website/dev/history", "token "+kargo, http.StatusNotFound)
	})

	t.Run("stacks in two readable namespaces need ?namespace=", func(t *testing.T) {
		get(t, "acme/website/dev/updates", "token "+auditor, http.StatusConflict)
		result := get(t, "acme/website/dev/updates?pageSize=1&namespace="+other, "token "+auditor, http.StatusOK)
		if at(t, result, "updates", 0, "result") != "failed" {
			t.Errorf("updates in %s = %v", other, result)
		}
	})

	t.Run("reviews are remembered", func(t *testing.T) {
		// A new token: one TokenReview, and one SubjectAccessReview per
		// Stack that deploys the name, however often it asks.
		fresh := token("kargo")
		tokens, access := tokenReviews.Load(), accessReviews.Load()
		for range 5 {
			get(t, "acme/website/dev/updates?pageSize=1", "token "+fresh, http.StatusOK)
		}
		if n := tokenReviews.Load() - tokens; n != 1 {
			t.Errorf("%d TokenReviews for five requests with one token, want 1", n)
		}
		// dev and dev-preview in ns, dev in the other namespace.
		if n := accessReviews.Load() - access; n != 3 {
			t.Errorf("%d SubjectAccessReviews for five requests about three Stacks, want 3", n)
		}
		allTokens = append(allTokens, fresh)
	})

	t.Run("a user past the rate limit is 429", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		limited := cloudapi.NewHandler(opClient, log, cloudapi.WithUserRateLimit(0.01, 2))
		srv := &http.Server{Handler: limited, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		codes := make([]int, 0, 3)
		for range 3 {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ln.Addr().String()+"/api/stacks/acme/website/dev/updates", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "token "+kargo)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			codes = append(codes, resp.StatusCode)
			if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
				t.Error("a 429 without Retry-After")
			}
		}
		if want := []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests}; !slices.Equal(codes, want) {
			t.Errorf("codes %v, want %v (a burst of two)", codes, want)
		}
	})

	t.Run("an address presenting unreviewed tokens past the limit is 429", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		limited := cloudapi.NewHandler(opClient, log, cloudapi.WithAddressRateLimit(0.01, 2))
		srv := &http.Server{Handler: limited, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		ask := func(tok string) int {
			t.Helper()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ln.Addr().String()+"/api/stacks/acme/website/dev/updates", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "token "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			return resp.StatusCode
		}
		// Each new token costs a TokenReview, so a caller spraying tokens
		// meets the limit; a token already reviewed does not count.
		codes := []int{ask(kargo), ask("sprayed-1-" + strings.Repeat("x", 30)), ask("sprayed-2-" + strings.Repeat("x", 30)), ask(kargo)}
		if want := []int{http.StatusOK, http.StatusUnauthorized, http.StatusTooManyRequests, http.StatusOK}; !slices.Equal(codes, want) {
			t.Errorf("codes %v, want %v (a burst of two unreviewed tokens)", codes, want)
		}
	})

	for _, tok := range allTokens {
		if strings.Contains(logs.String(), tok) {
			t.Fatalf("the log holds a token:\n%s", logs.String())
		}
	}
}

// writeStack creates a Stack with a git source and then writes its status,
// as the Stack controller would.
func writeStack(ctx context.Context, t *testing.T, c client.Client, ns, name string, spec shared.StackSpec, status pulumiv1.StackStatus) {
	t.Helper()
	spec.GitSource = &shared.GitSource{ProjectRepo: "https://git.example.com/website.git", Branch: "main"}
	s := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	s.Status = status
	if err := c.Status().Update(ctx, s); err != nil {
		t.Fatal(err)
	}
}
