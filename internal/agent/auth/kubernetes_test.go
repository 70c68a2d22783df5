package auth

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/stackyard/stackyard/internal/agent/auth/apireviews"
	"github.com/stackyard/stackyard/internal/agent/auth/kubereviews"
)

// binDir finds the repository's bin/ folder, where `make tools` puts etcd
// and kube-apiserver, by walking up from the package directory (where go
// test runs) to the folder holding go.mod.
func binDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "bin")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("cannot find the repository root (no go.mod above the test)")
		}
		dir = parent
	}
}

// startAPIServer starts a real etcd and kube-apiserver. envtest's defaults
// already give the API server a service-account issuer and signing keys, so
// TokenRequest and TokenReview work without extra flags, and RBAC
// authorisation, so SubjectAccessReviews are answered by real Roles.
func startAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	bin := binDir(t)
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			t.Fatalf("%s is missing from %s: run `make tools` first (%v)", name, bin, err)
		}
	}
	env := &envtest.Environment{BinaryAssetsDirectory: bin}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start the test API server: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop the test API server: %v", err)
		}
	})
	return cfg
}

// reviewCounter counts the review requests that pass through a client.
type reviewCounter struct {
	tokenReviews, accessReviews atomic.Int32
}

func (c *reviewCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodPost {
			switch {
			case strings.HasSuffix(req.URL.Path, "/tokenreviews"):
				c.tokenReviews.Add(1)
			case strings.HasSuffix(req.URL.Path, "/subjectaccessreviews"):
				c.accessReviews.Add(1)
			}
		}
		return rt.RoundTrip(req)
	})
}

func (c *reviewCounter) counts() [2]int32 {
	return [2]int32{c.tokenReviews.Load(), c.accessReviews.Load()}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// syncBuffer collects log output from concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) add(prefix, args string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(prefix + " " + args + "\n")
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestKubernetes(t *testing.T) {
	cfg := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	admin := kubernetes.NewForConfigOrDie(cfg)
	counter := &reviewCounter{}
	countedCfg := rest.CopyConfig(cfg)
	countedCfg.Wrap(counter.wrap)
	counted := kubernetes.NewForConfigOrDie(countedCfg)

	const (
		ns        = "agent-auth"
		caller    = "operator"
		workspace = "ws"
		other     = "other-ws"
	)
	mustCreate(t, func() error {
		_, err := admin.CoreV1().Namespaces().Create(ctx,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: caller}}, metav1.CreateOptions{})
		return err
	})
	mint := func(audiences ...string) string {
		t.Helper()
		tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, caller, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To[int64](600)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("TokenRequest: %v", err)
		}
		return tr.Status.Token
	}
	var (
		good       = mint(WorkspaceAudience(ns, workspace))
		otherAud   = mint(WorkspaceAudience(ns, other))
		apiAud     = mint() // the API server's own audience
		garbage    = "not-a-jwt-" + strings.Repeat("x", 40)
		allTokens  = []string{good, otherAud, apiAud, garbage}
		logs       = &syncBuffer{}
		log        = funcr.New(logs.add, funcr.Options{Verbosity: 2})
		noCache    = KubernetesConfig{Client: kubereviews.For(admin), Namespace: ns, Name: workspace, AllowTTL: -1, DenyTTL: -1, Log: log}
		authorizer = NewKubernetes(noCache)
	)

	// expect checks one decision, and that its error does not leak a token.
	expect := func(t *testing.T, a Authorizer, token string, want codes.Code) {
		t.Helper()
		err := a.Authorize(ctx, token)
		t.Logf("Authorize: %v", err)
		if got := status.Code(err); got != want {
			t.Fatalf("code = %v (%v), want %v", got, err, want)
		}
		assertNoToken(t, "error", errString(err), allTokens)
	}

	t.Run("garbage token is unauthenticated", func(t *testing.T) {
		expect(t, authorizer, garbage, codes.Unauthenticated)
	})
	t.Run("token for another workspace is unauthenticated", func(t *testing.T) {
		expect(t, authorizer, otherAud, codes.Unauthenticated)
	})
	t.Run("token for the API server is unauthenticated", func(t *testing.T) {
		expect(t, authorizer, apiAud, codes.Unauthenticated)
	})
	t.Run("valid token without a RoleBinding is denied", func(t *testing.T) {
		expect(t, authorizer, good, codes.PermissionDenied)
	})

	grantRPC(ctx, t, admin, ns, caller, workspace)

	t.Run("valid token with a RoleBinding is allowed", func(t *testing.T) {
		// The API server's RBAC authoriser learns of the new binding through
		// an informer, so give it a moment.
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := authorizer.Authorize(ctx, good)
			if err == nil {
				break
			}
			if status.Code(err) != codes.PermissionDenied || time.Now().After(deadline) {
				t.Fatalf("not allowed: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	t.Run("binding for another workspace is denied", func(t *testing.T) {
		a := NewKubernetes(KubernetesConfig{Client: kubereviews.For(admin), Namespace: ns, Name: other, AllowTTL: -1, DenyTTL: -1, Log: log})
		expect(t, a, otherAud, codes.PermissionDenied)
		// And the token for "ws" is not accepted by "other-ws" either.
		expect(t, a, good, codes.Unauthenticated)
	})

	t.Run("decisions are cached and expire", func(t *testing.T) {
		clk := clocktesting.NewFakePassiveClock(time.Now())
		a := NewKubernetes(KubernetesConfig{Client: kubereviews.For(counted), Namespace: ns, Name: workspace, Clock: clk, Log: log})
		step := func(d time.Duration) { clk.SetTime(clk.Now().Add(d)) }
		wantCounts := func(tr, sar int32) {
			t.Helper()
			if got := counter.counts(); got != [2]int32{tr, sar} {
				t.Fatalf("reviews (token, access) = %v, want [%d %d]", got, tr, sar)
			}
		}

		expect(t, a, good, codes.OK)
		wantCounts(1, 1)
		expect(t, a, good, codes.OK)
		wantCounts(1, 1)
		step(DefaultAllowTTL - time.Second)
		expect(t, a, good, codes.OK)
		wantCounts(1, 1)
		step(2 * time.Second)
		expect(t, a, good, codes.OK)
		wantCounts(2, 2)

		expect(t, a, garbage, codes.Unauthenticated)
		wantCounts(3, 2)
		expect(t, a, garbage, codes.Unauthenticated)
		wantCounts(3, 2)
		step(DefaultDenyTTL + time.Second)
		expect(t, a, garbage, codes.Unauthenticated)
		wantCounts(4, 2)

		// The cache is keyed by digests, never by the tokens themselves.
		keys := a.(*kubernetesAuthorizer).cache.Keys()
		if len(keys) == 0 {
			t.Fatal("nothing cached")
		}
		for _, k := range keys {
			if _, ok := k.(tokenKey); !ok {
				t.Fatalf("cache key of type %T, want tokenKey", k)
			}
		}
	})

	t.Run("concurrent calls share one review", func(t *testing.T) {
		a := NewKubernetes(KubernetesConfig{Client: kubereviews.For(counted), Namespace: ns, Name: workspace, Log: log})
		before := counter.counts()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if err := a.Authorize(ctx, good); err != nil {
					t.Errorf("Authorize: %v", err)
				}
			})
		}
		wg.Wait()
		after := counter.counts()
		// Calls that arrive after the first review finished hit the cache;
		// the rest join it. Either way there is exactly one round.
		if after[0]-before[0] != 1 || after[1]-before[1] != 1 {
			t.Fatalf("reviews went from %v to %v, want one more of each", before, after)
		}
	})

	t.Run("unreachable API server is unavailable and not cached", func(t *testing.T) {
		down := kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://127.0.0.1:1", Timeout: 2 * time.Second})
		a := NewKubernetes(KubernetesConfig{Client: kubereviews.For(down), Namespace: ns, Name: workspace, Log: log})
		expect(t, a, good, codes.Unavailable)
		if n := len(a.(*kubernetesAuthorizer).cache.Keys()); n != 0 {
			t.Fatalf("%d failures cached", n)
		}
	})

	t.Run("agent without auth-delegator is an internal error", func(t *testing.T) {
		// Ask as the caller's service account, which may not create reviews.
		weak := kubernetes.NewForConfigOrDie(&rest.Config{
			Host:            cfg.Host,
			TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData},
			BearerToken:     apiAud,
		})
		a := NewKubernetes(KubernetesConfig{Client: kubereviews.For(weak), Namespace: ns, Name: workspace, Log: log})
		expect(t, a, good, codes.Internal)
	})

	t.Run("reviews over HTTPS without client-go", func(t *testing.T) {
		// The lean agent's Reviewer, as a pod runs it: its own service
		// account's token in a file, the cluster's CA, the API server's URL.
		dir := t.TempDir()
		caFile, tokenFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token")
		writeFile(t, caFile, string(cfg.CAData))
		// First the caller's token, whose account may not create reviews.
		writeFile(t, tokenFile, apiAud)
		server := cfg.Host
		if !strings.HasPrefix(server, "https://") {
			server = "https://" + server
		}
		reviews, err := apireviews.New(apireviews.Config{Server: server, TokenFile: tokenFile, CAFile: caFile})
		if err != nil {
			t.Fatal(err)
		}
		a := NewKubernetes(KubernetesConfig{Client: reviews, Namespace: ns, Name: workspace, AllowTTL: -1, DenyTTL: -1, Log: log})
		expect(t, a, good, codes.Internal)

		// The kubelet rotates the file: the next review uses the new token,
		// now one of an account bound to system:auth-delegator.
		writeFile(t, tokenFile, delegatorToken(ctx, t, admin, ns, "agent"))
		// RBAC learns of the new binding through an informer.
		deadline := time.Now().Add(10 * time.Second)
		for status.Code(a.Authorize(ctx, garbage)) == codes.Internal && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		expect(t, a, garbage, codes.Unauthenticated)
		expect(t, a, otherAud, codes.Unauthenticated)
		expect(t, a, apiAud, codes.Unauthenticated)
		expect(t, a, good, codes.OK)
		elsewhere := NewKubernetes(KubernetesConfig{Client: reviews, Namespace: ns, Name: other, AllowTTL: -1, DenyTTL: -1, Log: log})
		expect(t, elsewhere, otherAud, codes.PermissionDenied)

		if _, err := apireviews.New(apireviews.Config{Server: cfg.Host, TokenFile: tokenFile, CAFile: filepath.Join(dir, "none")}); err == nil ||
			!strings.Contains(err.Error(), "CA bundle") {
			t.Fatalf("New without a CA bundle: %v, want an error naming it", err)
		}
		if _, err := apireviews.New(apireviews.Config{Server: "http://" + strings.TrimPrefix(server, "https://"), TokenFile: tokenFile, CAFile: caFile}); err == nil {
			t.Fatal("New accepted a plain-HTTP API server")
		}
		writeFile(t, tokenFile, "\n")
		if _, err := apireviews.New(apireviews.Config{Server: server, TokenFile: tokenFile, CAFile: caFile}); err == nil ||
			!strings.Contains(err.Error(), "is empty") {
			t.Fatalf("New with an empty token: %v, want an error naming it", err)
		}
	})

	out := logs.String()
	t.Logf("authorizer log:\n%s", out)
	if !strings.Contains(out, "Denied an RPC") || !strings.Contains(out, "Allowed an RPC") {
		t.Errorf("expected decisions in the log, got:\n%s", out)
	}
	assertNoToken(t, "log", out, allTokens)
}

// grantRPC lets the service account use the RPC endpoint of one workspace,
// exactly as the operator's RBAC would.
func grantRPC(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, sa, workspace string) {
	t.Helper()
	mustCreate(t, func() error {
		_, err := c.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "workspace-rpc"},
			Rules: []rbacv1.PolicyRule{{
				APIGroups:     []string{"auto.pulumi.com"},
				Resources:     []string{"workspaces/rpc"},
				ResourceNames: []string{workspace},
				Verbs:         []string{"use"},
			}},
		}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := c.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "workspace-rpc"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "workspace-rpc"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
		}, metav1.CreateOptions{})
		return err
	})
}

// delegatorToken creates the service account ns/name, binds it to the
// built-in ClusterRole system:auth-delegator, as an agent's account is, and
// returns a token for it.
func delegatorToken(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name string) string {
	t.Helper()
	mustCreate(t, func() error {
		_, err := c.CoreV1().ServiceAccounts(ns).Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name + "-auth-delegator"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
		}, metav1.CreateOptions{})
		return err
	})
	tr, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	return tr.Status.Token
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mustCreate(t *testing.T, create func() error) {
	t.Helper()
	if err := create(); err != nil {
		t.Fatal(err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func assertNoToken(t *testing.T, what, s string, tokens []string) {
	t.Helper()
	for _, tok := range tokens {
		if tok != "" && strings.Contains(s, tok) {
			t.Fatalf("%s contains a token: %s", what, s)
		}
	}
}

func TestWorkspaceAudience(t *testing.T) {
	if got, want := WorkspaceAudience("team-a", "app.prod"), "app.prod.team-a"; got != want {
		t.Fatalf("WorkspaceAudience = %q, want %q", got, want)
	}
}

func TestNewKubernetesRequiresConfig(t *testing.T) {
	for name, cfg := range map[string]KubernetesConfig{
		"no client":    {Namespace: "ns", Name: "ws"},
		"no namespace": {Client: kubereviews.For(kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://127.0.0.1:1"})), Name: "ws"},
		"no name":      {Client: kubereviews.For(kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://127.0.0.1:1"})), Namespace: "ns"},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			NewKubernetes(cfg)
		})
	}
}
