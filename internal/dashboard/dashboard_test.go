package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/controller/update"
	"github.com/stackyard/stackyard/internal/dashboard"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/test/testenv"
)

// The suite's shared world: one API server with the admission policies, a
// manager whose cache feeds two dashboards (one read-only), both run as
// the operator's ServiceAccount bound to the packaged ClusterRole alone.
var (
	env            *testenv.Env
	mgr            ctrl.Manager
	baseURL, roURL string
	dashLogs       = &testenv.SyncBuffer{}
	tokens         = map[string]string{}
	nsA, nsB       = "team-a", "team-b"
	shaOld, shaNew = strings.Repeat("a", 40), strings.Repeat("b", 40)
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	var err error
	env, err = testenv.Start(testenv.Options{AddToScheme: []func(*k8sruntime.Scheme) error{
		pulumiv1.AddToScheme, autov1alpha1.AddToScheme, promotionv1alpha1.AddToScheme,
	}})
	if err != nil {
		return 1, err
	}
	defer func() { _ = env.Stop() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := env.InstallPolicies(ctx); err != nil {
		return 1, err
	}
	opCfg, err := env.ServiceAccountConfig(ctx, "stackyard-system", "stackyard", testenv.OperatorRoles()...)
	if err != nil {
		return 1, err
	}
	mgr, err = ctrl.NewManager(opCfg, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return 1, err
	}
	// The operator registers these before its dashboard starts.
	if err := change.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return 1, err
	}
	log := funcr.New(func(prefix, args string) { fmt.Fprintln(dashLogs, prefix, args) }, funcr.Options{Verbosity: 2})
	for _, ro := range []bool{false, true} {
		srv, err := dashboard.New(dashboard.Config{
			Reader: mgr.GetClient(), Reviews: mgr.GetClient(), Informers: mgr.GetCache(), RESTConfig: mgr.GetConfig(),
			ReadOnly: ro, Log: log, Heartbeat: 200 * time.Millisecond,
		})
		if err != nil {
			return 1, err
		}
		if err := srv.Listen("127.0.0.1:0"); err != nil {
			return 1, err
		}
		if err := mgr.Add(srv); err != nil {
			return 1, err
		}
		if ro {
			roURL = "http://" + srv.Addr().String()
		} else {
			baseURL = "http://" + srv.Addr().String()
		}
	}
	go func() { _ = mgr.Start(ctx) }()
	if err := seed(ctx, nsA); err != nil {
		return 1, err
	}
	if err := user(ctx, nsB, "carol", readAll...); err != nil {
		return 1, err
	}
	if err := env.Client.Create(ctx, stack(nsB, "other")); err != nil {
		return 1, err
	}
	return m.Run(), nil
}

// rule is shorthand for a PolicyRule.
func rule(group string, resources []string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs}
}

var (
	readAll = []rbacv1.PolicyRule{
		rule("promotion.stackyard.dev", []string{"*"}, "get", "list", "watch"),
		rule("pulumi.com", []string{"stacks"}, "get", "list", "watch"),
		rule("auto.pulumi.com", []string{"updates"}, "get", "list", "watch"),
	}
	// approveRules lets a user decide on promotions into any stage, and
	// halt, resume or abort those that run.
	approveRules = []rbacv1.PolicyRule{
		rule("promotion.stackyard.dev", []string{"stages"}, "approve", "operate"),
		rule("promotion.stackyard.dev", []string{"approvals", "interventions"}, "create"),
	}
	// operateRules lets a user request promotions and reconciles.
	operateRules = []rbacv1.PolicyRule{
		rule("promotion.stackyard.dev", []string{"promotions"}, "create"),
		rule("pulumi.com", []string{"stacks"}, "patch"),
	}
)

// user creates a ServiceAccount in ns with a Role of rules there, and
// keeps a token for it under name (alice, bob) or ns/name.
func user(ctx context.Context, ns, name string, rules ...rbacv1.PolicyRule) error {
	token, err := testenv.UserToken(ctx, env.Client, ns, name, rules...)
	if err != nil {
		return err
	}
	tokens[ns+"/"+name] = token
	if ns == nsA || ns == nsB {
		tokens[name] = token
	}
	return nil
}

// seed creates a team's namespace ns with the pipeline web (dev and dev2
// fed by git, qa after both, with one approval required) and its Stacks.
// alice operates and approves there, bob only reads (he may create
// Approvals and Interventions, but not approve nor operate). team-b (nsB) has a Stack only, and carol,
// who reads there.
func seed(ctx context.Context, nsA string) error {
	c := env.Client
	for _, ns := range []string{nsA, nsB} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	if err := user(ctx, nsA, "alice", append(append(readAll, approveRules...), operateRules...)...); err != nil {
		return err
	}
	if err := user(ctx, nsA, "bob", append(readAll, rule("promotion.stackyard.dev", []string{"approvals", "interventions"}, "create"))...); err != nil {
		return err
	}
	pipeline := &promotionv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "web"},
		Spec:       promotionv1alpha1.PipelineSpec{Git: promotionv1alpha1.GitSubscription{RepoURL: "https://git.example.invalid/web.git", Branch: "main"}},
	}
	stage := func(name string, direct bool, upstream []string, approval *promotionv1alpha1.ApprovalPolicy) *promotionv1alpha1.Stage {
		st := &promotionv1alpha1.Stage{
			ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: name},
			Spec: promotionv1alpha1.StageSpec{
				Pipeline: "web", Stacks: []promotionv1alpha1.StackBinding{{Name: "site-" + name}},
				Sources: promotionv1alpha1.ReleaseSources{Direct: direct, Stages: upstream}, Approval: approval,
			},
		}
		if len(upstream) > 1 {
			st.Spec.Sources.AvailabilityStrategy = promotionv1alpha1.All
		}
		return st
	}
	release := func(name, sha, subject string) *promotionv1alpha1.Release {
		return &promotionv1alpha1.Release{
			ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: name},
			Spec: promotionv1alpha1.ReleaseSpec{Pipeline: "web", Commit: promotionv1alpha1.ReleaseCommit{
				SHA: sha, Branch: "main", Subject: subject, Author: "Dana Dev <dana@example.com>",
			}},
		}
	}
	objs := []client.Object{
		pipeline,
		stage("dev", true, nil, nil), stage("dev2", true, nil, nil),
		stage("qa", false, []string{"dev", "dev2"}, &promotionv1alpha1.ApprovalPolicy{Required: 1}),
		release("web-aaaaaaa", shaOld, "first cut"), release("web-bbbbbbb", shaNew, "faster pages"),
	}
	for _, name := range []string{"site-dev", "site-dev2", "site-qa"} {
		objs = append(objs, stack(nsA, name))
	}
	for _, obj := range objs {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %s: %w", obj.GetName(), err)
		}
	}
	// Statuses, as the controllers would write them.
	now := metav1.Now()
	var dev promotionv1alpha1.Stage
	if err := c.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "dev"}, &dev); err != nil {
		return err
	}
	dev.Status.Health = &promotionv1alpha1.StageHealth{Status: promotionv1alpha1.Healthy}
	dev.Status.CurrentRelease = &promotionv1alpha1.StageRelease{Name: "web-bbbbbbb", SHA: shaNew, Subject: "faster pages", Since: now}
	if err := c.Status().Update(ctx, &dev); err != nil {
		return err
	}
	var rel promotionv1alpha1.Release
	if err := c.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "web-bbbbbbb"}, &rel); err != nil {
		return err
	}
	rel.Status.CurrentlyIn = map[string]promotionv1alpha1.ReleaseInStage{"dev": {Since: now}}
	rel.Status.VerifiedIn = map[string]promotionv1alpha1.ReleaseInStage{"dev": {Since: now}, "dev2": {Since: now}}
	return c.Status().Update(ctx, &rel)
}

// stack is a Stack deployed from git with a Ready status, one plain and one
// secret output.
func stack(ns, name string) *pulumiv1.Stack {
	return &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: shared.StackSpec{
			Stack:     "org/web/" + name,
			GitSource: &shared.GitSource{ProjectRepo: "https://git.example.invalid/web.git", Commit: shaOld},
			SecretRefs: map[string]shared.ResourceRef{"password": {
				SelectorType:     shared.ResourceSelectorSecret,
				ResourceSelector: shared.ResourceSelector{SecretRef: &shared.SecretSelector{Name: "db", Key: "password"}},
			}},
		},
	}
}

// markReady writes a Ready status with outputs, as the Stack controller
// does: a secret output is "[secret]" there.
func markReady(g Gomega, ctx context.Context, ns, name string) {
	var st pulumiv1.Stack
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &st)).To(Succeed())
	st.Status.ObservedGeneration = st.Generation
	sreconcile.MarkReady(&st.Status.Conditions, st.Generation, "the stack is up to date")
	st.Status.Outputs = shared.StackOutputs{
		"url":      apiextensionsv1.JSON{Raw: []byte(`"https://site.example"`)},
		"password": apiextensionsv1.JSON{Raw: []byte(`"[secret]"`)},
	}
	st.Status.LastUpdate = &shared.StackUpdateState{Name: name + "-1", State: shared.SucceededStackStateMessage, LastAttemptedCommit: shaOld, LastSuccessfulCommit: shaOld, LastResyncTime: metav1.Now()}
	g.Expect(env.Client.Status().Update(ctx, &st)).To(Succeed())
}

// httpBrowser is an HTTP client with a cookie jar that never follows
// redirects, so a test sees each answer.
func httpBrowser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// get fetches path with token as a bearer token ("" for none).
func get(t *testing.T, base, path, token string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return do(t, httpBrowser(), req)
}

func do(t *testing.T, c *http.Client, req *http.Request) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body), resp.Header
}

// postForm posts an action form with a bearer token, as a page's form
// does, with the session's CSRF token unless csrf says otherwise.
func postForm(t *testing.T, base, path, token string, form url.Values, headers map[string]string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return do(t, httpBrowser(), req)
}

// csrfOf reads the CSRF token a page embeds for its forms.
func csrfOf(t *testing.T, token string) string {
	t.Helper()
	code, body, _ := get(t, baseURL, "/stacks", token)
	if code != http.StatusOK {
		t.Fatalf("GET /stacks: %d\n%s", code, body)
	}
	const marker = `<meta name="csrf-token" content="`
	i := strings.Index(body, marker)
	if i < 0 {
		t.Fatalf("no CSRF token in /stacks:\n%s", body)
	}
	rest := body[i+len(marker):]
	return rest[:strings.IndexByte(rest, '"')]
}

func TestSignIn(t *testing.T) {
	g := NewWithT(t)
	// Nobody is let in without a token the API server accepts.
	code, _, h := get(t, baseURL, "/pipelines", "")
	g.Expect(code).To(Equal(http.StatusSeeOther))
	g.Expect(h.Get("Location")).To(Equal("/login?next=%2Fpipelines"))
	for _, path := range []string{"/events", "/audit.json"} {
		code, _, _ = get(t, baseURL, path, "")
		g.Expect(code).To(Equal(http.StatusUnauthorized), path)
	}
	code, _, _ = get(t, baseURL, "/stacks", "not-a-token")
	g.Expect(code).To(Equal(http.StatusSeeOther))
	code, _, _ = postForm(t, baseURL, "/actions/reconcile", "", url.Values{"namespace": {nsA}, "stack": {"site-dev"}}, nil)
	g.Expect(code).To(Equal(http.StatusUnauthorized))

	// The sign-in form: a wrong token is refused, a good one becomes an
	// HttpOnly, SameSite=Strict session cookie, and the page follows.
	b := httpBrowser()
	login := func(token string) *http.Response {
		form := url.Values{"token": {token}, "next": {"/stacks?namespace=" + nsA}}
		req, _ := http.NewRequest(http.MethodPost, baseURL+"/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := b.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		return resp
	}
	g.Expect(login("forged").StatusCode).To(Equal(http.StatusUnauthorized))
	resp := login(tokens["alice"])
	g.Expect(resp.StatusCode).To(Equal(http.StatusSeeOther))
	g.Expect(resp.Header.Get("Location")).To(Equal("/stacks?namespace=" + nsA))
	cookie := resp.Header.Get("Set-Cookie")
	g.Expect(cookie).To(ContainSubstring("HttpOnly"))
	g.Expect(cookie).To(ContainSubstring("SameSite=Strict"))
	req, _ := http.NewRequest(http.MethodGet, baseURL+"/stacks", nil)
	code, body, _ := do(t, b, req)
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring(`id="user">system:serviceaccount:team-a:alice<`))
	g.Expect(body).NotTo(ContainSubstring(tokens["alice"]))

	// A next that leads elsewhere leads home instead.
	form := url.Values{"token": {tokens["alice"]}, "next": {"//evil.example/x"}}
	code, _, h = postForm(t, baseURL, "/login", "", form, nil)
	g.Expect(code).To(Equal(http.StatusSeeOther))
	g.Expect(h.Get("Location")).To(Equal("/"))

	// Signing out forgets the cookie.
	req, _ = http.NewRequest(http.MethodPost, baseURL+"/logout", nil)
	code, _, _ = do(t, b, req)
	g.Expect(code).To(Equal(http.StatusSeeOther))
	req, _ = http.NewRequest(http.MethodGet, baseURL+"/stacks", nil)
	code, _, _ = do(t, b, req)
	g.Expect(code).To(Equal(http.StatusSeeOther))
}

func TestViewsShowWhatRBACAllows(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	for _, name := range []string{"site-dev", "site-dev2"} {
		markReady(g, ctx, nsA, name)
	}
	markReady(g, ctx, nsB, "other")

	// The pipeline as a graph: git feeds dev and dev2, both feed qa (All).
	var body string
	g.Eventually(func(g Gomega) {
		var code int
		code, body, _ = get(t, baseURL, "/pipelines/"+nsA+"/web", tokens["bob"])
		g.Expect(code).To(Equal(http.StatusOK), body)
		g.Expect(body).To(ContainSubstring(`data-stage="qa"`))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	for _, edge := range []string{`data-from="git" data-to="dev"`, `data-from="git" data-to="dev2"`, `data-from="dev" data-to="qa"`, `data-from="dev2" data-to="qa"`} {
		g.Expect(body).To(ContainSubstring(edge))
	}
	g.Expect(body).To(ContainSubstring(`class="edge all"`))
	// dev runs the new release, healthy; the timeline shows where each went.
	g.Expect(body).To(MatchRegexp(`(?s)id="stage-dev".*?release-name">web-bbbbbbb<.*?bbbbbbb.*?faster pages`))
	g.Expect(body).To(ContainSubstring("Dana Dev"))
	g.Expect(body).To(MatchRegexp(`(?s)data-release="web-bbbbbbb".*?class="cell current" data-stage="dev".*?class="cell verified" data-stage="dev2"`))
	// A read-only user gets no action that would fail... but the forms are
	// the API server's to refuse: bob sees them, and is refused below.

	// Stacks: bob sees team-a only; carol team-b only; the filter narrows.
	code, body, _ := get(t, baseURL, "/stacks", tokens["bob"])
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring(`data-stack="team-a/site-dev"`))
	g.Expect(body).NotTo(ContainSubstring(`data-stack="team-b/other"`))
	_, body, _ = get(t, baseURL, "/stacks", tokens["carol"])
	g.Expect(body).To(ContainSubstring(`data-stack="team-b/other"`))
	g.Expect(body).NotTo(ContainSubstring("team-a/"))
	_, body, _ = get(t, baseURL, "/stacks?state=Progressing", tokens["bob"])
	g.Expect(body).To(ContainSubstring(`data-stack="team-a/site-qa"`))
	g.Expect(body).NotTo(ContainSubstring(`data-stack="team-a/site-dev"`))
	_, body, _ = get(t, baseURL, "/pipelines", tokens["carol"])
	g.Expect(body).NotTo(ContainSubstring("pipeline-team-a-web"))
	code, _, _ = get(t, baseURL, "/pipelines/"+nsA+"/web", tokens["carol"])
	g.Expect(code).To(Equal(http.StatusNotFound))
	code, _, _ = get(t, baseURL, "/stacks/"+nsA+"/site-dev", tokens["carol"])
	g.Expect(code).To(Equal(http.StatusNotFound))

	// An Update's page is where a self-managed backend's permalinks lead.
	upd := &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "site-dev-up-1"},
		Spec:       autov1alpha1.UpdateSpec{WorkspaceName: "site-dev", StackName: "org/web/site-dev", Type: autov1alpha1.UpType},
	}
	g.Expect(env.Client.Create(ctx, upd)).To(Succeed())
	upd.Status.LogTail = []string{"create test:index:File page", "info page: wrote the page"}
	g.Expect(env.Client.Status().Update(ctx, upd)).To(Succeed())
	permalink := update.DashboardPermalink(baseURL, nsA, upd.Name)
	g.Eventually(func(g Gomega) {
		code, body, _ := get(t, "", permalink, tokens["bob"])
		g.Expect(code).To(Equal(http.StatusOK))
		g.Expect(body).To(ContainSubstring(`id="update-state">Pending<`))
		g.Expect(body).To(ContainSubstring("create test:index:File page\ninfo page: wrote the page"))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	code, _, _ = get(t, "", update.DashboardPermalink(baseURL, nsA, upd.Name), tokens["carol"])
	g.Expect(code).To(Equal(http.StatusNotFound))

	// A Stack's page: conditions, outputs with the secret masked.
	code, body, _ = get(t, baseURL, "/stacks/"+nsA+"/site-dev", tokens["bob"])
	g.Expect(code).To(Equal(http.StatusOK), body)
	g.Expect(body).To(ContainSubstring(`&#34;https://site.example&#34;`))
	g.Expect(body).To(ContainSubstring(`&#34;[secret]&#34;`))
	g.Expect(body).To(ContainSubstring("the stack is up to date"))
}

func TestActionsRunAsTheUser(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	csrf := csrfOf(t, tokens["alice"])
	form := url.Values{"namespace": {nsA}, "stack": {"site-dev"}, "_csrf": {csrf}, "return": {"/stacks/team-a/site-dev"}}

	// CSRF: no token, a wrong one, or another site's Origin is refused.
	for name, tc := range map[string]struct {
		form    url.Values
		headers map[string]string
	}{
		"no token":     {url.Values{"namespace": {nsA}, "stack": {"site-dev"}}, nil},
		"wrong token":  {url.Values{"namespace": {nsA}, "stack": {"site-dev"}, "_csrf": {csrfOf(t, tokens["bob"])}}, nil},
		"other origin": {form, map[string]string{"Origin": "https://evil.example"}},
		"cross-site":   {form, map[string]string{"Sec-Fetch-Site": "cross-site"}},
	} {
		code, body, _ := postForm(t, baseURL, "/actions/reconcile", tokens["alice"], tc.form, tc.headers)
		g.Expect(code).To(Equal(http.StatusForbidden), name+": "+body)
	}
	var st pulumiv1.Stack
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "site-dev"}, &st)).To(Succeed())
	g.Expect(st.Annotations).NotTo(HaveKey(shared.ReconcileRequestAnnotation))

	// Reconcile: alice may patch Stacks, bob may not (the API server says).
	code, body, h := postForm(t, baseURL, "/actions/reconcile", tokens["alice"], form, map[string]string{"Origin": baseURL})
	g.Expect(code).To(Equal(http.StatusSeeOther), body)
	g.Expect(h.Get("Location")).To(HavePrefix("/stacks/team-a/site-dev?notice="))
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "site-dev"}, &st)).To(Succeed())
	g.Expect(st.Annotations).To(HaveKey(shared.ReconcileRequestAnnotation))
	bobForm := url.Values{"namespace": {nsA}, "stack": {"site-dev"}, "_csrf": {csrfOf(t, tokens["bob"])}}
	code, body, _ = postForm(t, baseURL, "/actions/reconcile", tokens["bob"], bobForm, nil)
	g.Expect(code).To(Equal(http.StatusForbidden))
	g.Expect(body).To(ContainSubstring(`User &#34;system:serviceaccount:team-a:bob&#34; cannot patch resource &#34;stacks&#34;`))

	// Promote: the Promotion records alice as its requester (the policy
	// checks that against who the API server authenticated).
	promote := url.Values{"namespace": {nsA}, "stage": {"qa"}, "release": {"web-bbbbbbb"}, "reason": {"ship it"}, "_csrf": {csrf}}
	code, body, h = postForm(t, baseURL, "/actions/promote", tokens["alice"], promote, nil)
	g.Expect(code).To(Equal(http.StatusSeeOther), body)
	loc := h.Get("Location")
	g.Expect(loc).To(HavePrefix("/promotions/team-a/qa-"))
	name := strings.TrimPrefix(strings.SplitN(loc, "?", 2)[0], "/promotions/team-a/")
	var p promotionv1alpha1.Promotion
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: nsA, Name: name}, &p)).To(Succeed())
	g.Expect(p.Spec.RequestedBy).To(Equal("system:serviceaccount:team-a:alice"))
	g.Expect(p.Spec.Reason).To(Equal("ship it"))

	// The promotion waits for approval once its plan is decided (as the
	// Promotion controller would record it).
	g.Expect(decidePlan(ctx, env.Client, &p)).To(Succeed())
	var page string
	g.Eventually(func(g Gomega) {
		var code int
		code, page, _ = get(t, baseURL, "/promotions/team-a/"+name, tokens["bob"])
		g.Expect(code).To(Equal(http.StatusOK))
		g.Expect(page).To(ContainSubstring(`id="approve"`))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect(page).To(ContainSubstring("urn:pulumi:qa::web::test:index:File::page"))
	g.Expect(page).To(ContainSubstring("1 approval; the requester"))
	code, page, _ = get(t, baseURL, "/pipelines/team-a/web", tokens["bob"])
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(page).To(MatchRegexp(`(?s)id="waiting".*?` + name))

	// bob may create Approvals but not approve stages: the admission
	// policy refuses, and the page says why.
	decide := url.Values{"namespace": {nsA}, "promotion": {name}, "comment": {"lgtm"}}
	decide.Set("_csrf", csrfOf(t, tokens["bob"]))
	code, body, _ = postForm(t, baseURL, "/actions/approve", tokens["bob"], decide, nil)
	g.Expect(code).To(Equal(http.StatusForbidden), body)
	g.Expect(body).To(ContainSubstring(`needs the verb &#34;approve&#34; on stages.promotion.stackyard.dev`))
	// A rejection needs a reason.
	decide.Set("_csrf", csrf)
	decide.Set("comment", "")
	code, body, _ = postForm(t, baseURL, "/actions/reject", tokens["alice"], decide, nil)
	g.Expect(code).To(Equal(http.StatusBadRequest))
	g.Expect(body).To(ContainSubstring("comment: a rejection needs a reason"))
	// alice approves: the Approval names her, for this plan.
	decide.Set("comment", "lgtm")
	code, body, _ = postForm(t, baseURL, "/actions/approve", tokens["alice"], decide, nil)
	g.Expect(code).To(Equal(http.StatusSeeOther), body)
	var approvals promotionv1alpha1.ApprovalList
	g.Expect(env.Client.List(ctx, &approvals, client.InNamespace(nsA))).To(Succeed())
	g.Expect(approvals.Items).To(HaveLen(1))
	a := approvals.Items[0].Spec
	g.Expect(a.User).To(Equal("system:serviceaccount:team-a:alice"))
	g.Expect(a.PlanDigest).To(Equal(p.Status.PlanDigest))
	g.Expect(a.Decision).To(Equal(promotionv1alpha1.Approve))

	// The audit trail has it all, as JSON in the CLI's shape.
	code, body, h = get(t, baseURL, "/audit.json?namespace=team-a", tokens["bob"])
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(h.Get("Content-Type")).To(Equal("application/json"))
	var list struct {
		APIVersion, Kind string
		Items            []map[string]any
	}
	g.Expect(json.Unmarshal([]byte(body), &list)).To(Succeed())
	g.Expect(list.APIVersion).To(Equal("cli.stackyard.dev/v1"))
	g.Expect(list.Kind).To(Equal("History"))
	var events []string
	for _, e := range list.Items {
		events = append(events, fmt.Sprint(e["event"], " ", e["by"]))
	}
	g.Expect(events).To(ContainElements(
		"ReleaseDiscovered <nil>", "PromotionRequested system:serviceaccount:team-a:alice", "ApprovalGiven system:serviceaccount:team-a:alice"))
	// The page's export link keeps its filters.
	_, body, _ = get(t, baseURL, "/audit?namespace=team-a&event=ApprovalGiven", tokens["bob"])
	g.Expect(body).To(ContainSubstring(`href="/audit.json?namespace=team-a&amp;pipeline=&amp;stage=&amp;event=ApprovalGiven&amp;q="`))
	_, body, _ = get(t, baseURL, "/audit.json?event=ApprovalGiven", tokens["bob"])
	g.Expect(json.Unmarshal([]byte(body), &list)).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1))
	_, body, _ = get(t, baseURL, "/audit.json", tokens["carol"])
	g.Expect(json.Unmarshal([]byte(body), &list)).To(Succeed())
	g.Expect(list.Items).To(BeEmpty())

	// Read-only mode: no forms, and actions refused whoever asks.
	_, body, _ = get(t, roURL, "/stacks/team-a/site-dev", tokens["alice"])
	g.Expect(body).NotTo(ContainSubstring(`action="/actions/`))
	form.Set("_csrf", csrf)
	code, _, _ = postForm(t, roURL, "/actions/reconcile", tokens["alice"], form, nil)
	g.Expect(code).To(Equal(http.StatusForbidden))

	g.Expect(dashLogs.String()).NotTo(ContainSubstring(tokens["alice"]))
	g.Expect(dashLogs.String()).NotTo(ContainSubstring(tokens["bob"]))
}

// TestLiveEndsWithItsToken: an open event stream ends once its token is
// no longer valid (here its ServiceAccount is deleted), instead of telling
// a signed-out or revoked user about changes until the page closes.
func TestLiveEndsWithItsToken(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(user(ctx, nsA, "carol", readAll...)).To(Succeed())
	req, _ := http.NewRequest(http.MethodGet, baseURL+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+tokens[nsA+"/carol"])
	rctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(rctx))
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	ended := make(chan error, 1)
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // heartbeats nobody waits for any more
			}
		}
		ended <- sc.Err()
	}()
	// Heartbeats pass while the token is valid.
	g.Eventually(lines, 10*time.Second).Should(Receive(Equal(": ping")))
	g.Consistently(ended, time.Second).ShouldNot(Receive())

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "carol"}}
	g.Expect(env.Client.Delete(ctx, sa)).To(Succeed())
	// The API server trusts a token it checked for up to 10 s.
	g.Eventually(ended, 25*time.Second).Should(Receive(BeNil()), "the stream outlived its ServiceAccount")
	g.Expect(rctx.Err()).NotTo(HaveOccurred(), "the stream ended by the test's own timeout")
}

// TestLive: an open event stream says hello with the server's boot ID,
// then "change" when a watched object changes.
func TestLive(t *testing.T) {
	g := NewWithT(t)
	req, _ := http.NewRequest(http.MethodGet, baseURL+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+tokens["bob"])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(resp.Header.Get("Content-Type")).To(Equal("text/event-stream"))
	events := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if ev, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				events <- ev
			}
		}
		close(events)
	}()
	g.Eventually(events, 10*time.Second).Should(Receive(Equal("hello")))
	for len(events) > 0 {
		<-events
	}
	markReady(g, context.Background(), nsA, "site-qa")
	g.Eventually(events, 10*time.Second).Should(Receive(Equal("change")))
}
