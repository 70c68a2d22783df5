package policy_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/test/testenv"
)

// installPeopleRoles creates the ClusterRoles of config/people/roles.yaml,
// as kustomize and the Helm chart install them.
func installPeopleRoles(t *testing.T) {
	t.Helper()
	if err := env.InstallPeopleRoles(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// person is a new ServiceAccount ns/name bound in ns to the ClusterRole
// role and nothing else, as a client authenticated by its bearer token.
func person(t *testing.T, ns, name, role string) client.Client {
	t.Helper()
	token, err := testenv.BoundToken(context.Background(), env.Client, ns, name, ns, role)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.TokenConfig(token), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// may asks the API server's authorizer whether c may verb the resource
// (group/resource, object name optional) in ns.
func may(t *testing.T, c client.Client, ns, verb, group, resource, name string) bool {
	t.Helper()
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: resource, Name: name},
	}}
	NewWithT(t).Expect(c.Create(context.Background(), review)).To(Succeed())
	return review.Status.Allowed
}

// TestPeopleRoles binds each role of config/people to a person of its own
// (a ServiceAccount with a bearer token) and checks, with the real RBAC
// and admission policies, what it may and may not do: the rows of
// docs/security.md "Roles for people".
func TestPeopleRoles(t *testing.T) {
	installPeopleRoles(t)
	f := newFixture(t)
	ctx := context.Background()
	const (
		promo   = "promotion.stackyard.dev"
		pulumi  = "pulumi.com"
		notify  = "notification.stackyard.dev"
		workspc = "auto.pulumi.com"
	)
	type check struct {
		verb, group, resource string
		allowed               bool
	}
	reads := []check{
		{"list", pulumi, "stacks", true}, {"list", promo, "stages", true}, {"list", promo, "promotions", true},
		{"list", promo, "approvals", true}, {"list", promo, "releases", true},
	}
	// Nobody but the operator holds these.
	operatorOnly := []check{
		{"record", promo, "promotions", false}, {"record", promo, "releases", false}, {"record", pulumi, "stacks", false},
		{"autopromote", promo, "promotions", false}, {"get", "", "secrets", false},
	}
	for _, tc := range []struct {
		role   string
		checks []check
	}{
		{"stackyard-viewer", []check{
			{"list", workspc, "updates", true}, {"list", notify, "alerts", true},
			{"create", promo, "promotions", false}, {"update", pulumi, "stacks", false}, {"approve", promo, "stages", false},
		}},
		{"stackyard-editor", []check{
			{"create", pulumi, "stacks", true}, {"update", pulumi, "programs", true}, {"create", workspc, "workspaces", true},
			{"create", notify, "alerts", true}, {"create", promo, "stages", false}, {"govern", promo, "stages", false},
			{"create", promo, "promotions", false}, {"approve", promo, "stages", false},
		}},
		{"stackyard-promoter", []check{
			{"create", promo, "promotions", true}, {"create", promo, "approvals", false}, {"approve", promo, "stages", false},
			{"update", promo, "stages", false}, {"update", pulumi, "stacks", false},
		}},
		{"stackyard-approver", []check{
			{"approve", promo, "stages", true}, {"create", promo, "approvals", true}, {"create", promo, "promotions", false},
			{"govern", promo, "stages", false}, {"update", pulumi, "stacks", false},
		}},
		{"stackyard-governor", []check{
			{"govern", promo, "stages", true}, {"govern", promo, "pipelines", true}, {"update", promo, "stages", true},
			{"create", pulumi, "stacks", true}, {"delete", promo, "promotions", true}, {"approve", promo, "stages", false},
			{"create", promo, "approvals", false}, {"create", promo, "promotions", false},
		}},
		{"stackyard-admin", []check{
			{"govern", promo, "stages", true}, {"approve", promo, "stages", true}, {"create", promo, "approvals", true},
			{"delete", workspc, "updates", true}, {"create", notify, "providers", true},
		}},
	} {
		t.Run(tc.role, func(t *testing.T) {
			c := person(t, f.ns, tc.role, tc.role)
			for _, ck := range append(append(append([]check{}, reads...), operatorOnly...), tc.checks...) {
				if got := may(t, c, f.ns, ck.verb, ck.group, ck.resource, ""); got != ck.allowed {
					t.Errorf("%s may %s %s.%s: %v, want %v", tc.role, ck.verb, ck.resource, ck.group, got, ck.allowed)
				}
			}
		})
	}

	// Through the admission policies, not only RBAC.
	g := NewWithT(t)
	promoter := person(t, f.ns, "pat", "stackyard-promoter")
	g.Expect(promoter.Create(ctx, &promotionv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "prod-asked"},
		Spec:       promotionv1alpha1.PromotionSpec{Stage: "prod", Release: "r1", RequestedBy: whoAmI(t, promoter), Reason: "a promoter asks"},
	})).To(Succeed())
	approval := func(c client.Client, name string) *promotionv1alpha1.Approval {
		return &promotionv1alpha1.Approval{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
			Spec: promotionv1alpha1.ApprovalSpec{Promotion: "prod-asked", Stage: "prod", PlanDigest: "sha256:0123",
				Decision: promotionv1alpha1.Approve, User: whoAmI(t, c), Groups: groupsOf(t, c)}}
	}
	g.Expect(promoter.Create(ctx, approval(promoter, "by-promoter"))).NotTo(Succeed(), "a promoter approved")
	approver := person(t, f.ns, "avery", "stackyard-approver")
	g.Expect(approver.Create(ctx, approval(approver, "by-approver"))).To(Succeed())
	governor := person(t, f.ns, "gale", "stackyard-governor")
	g.Expect(governor.Create(ctx, approval(governor, "by-governor"))).To(MatchError(ContainSubstring("forbidden")))

	// A governor binds a new Stack to prod; an editor cannot, nor move
	// the commit of a governed one.
	bound := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "bound", Annotations: map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: "prod"}},
		Spec:       shared.StackSpec{Stack: "bound", GitSource: &shared.GitSource{ProjectRepo: "https://git.example.invalid/web.git", Commit: "0123456789abcdef0123456789abcdef01234567"}},
	}
	editor := person(t, f.ns, "eddie", "stackyard-editor")
	g.Expect(editor.Create(ctx, bound.DeepCopy())).To(MatchError(ContainSubstring(`needs the verb "govern"`)))
	g.Expect(governor.Create(ctx, bound.DeepCopy())).To(Succeed())
	prod := &pulumiv1.Stack{}
	g.Expect(editor.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "prod"}, prod)).To(Succeed())
	prod.Spec.Commit = "89abcdef0123456789abcdef0123456789abcdef"
	g.Expect(editor.Update(ctx, prod)).To(MatchError(ContainSubstring("changes only through its promotions")))
}

// TestPeopleRolesAggregated runs Kubernetes' own ClusterRole aggregation
// (kube-controller-manager with only its clusterrole-aggregation
// controller) and checks that the built-in roles gain what the people's
// roles say: view may read Stacks, edit may ask for promotions, admin too,
// and none of them gains govern or approve.
func TestPeopleRolesAggregated(t *testing.T) {
	installPeopleRoles(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := testenv.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	testenv.StartDaemon(t, "kube-controller-manager", []string{
		"--kubeconfig=" + kubeconfig, "--controllers=clusterrole-aggregation", "--leader-elect=false", "--secure-port=0",
	}, nil)
	ns := env.NewNamespace(t, "aggregated-")
	viewer, editor, admin := person(t, ns, "viewer", "view"), person(t, ns, "editor", "edit"), person(t, ns, "admin", "admin")
	const promo = "promotion.stackyard.dev"
	g := NewWithT(t)
	g.Eventually(func() bool { return may(t, viewer, ns, "list", "pulumi.com", "stacks", "") }).
		WithTimeout(time.Minute).Should(BeTrue(), "view never gained the stackyard-viewer rules")
	g.Eventually(func() bool { return may(t, editor, ns, "create", promo, "promotions", "") }).
		WithTimeout(time.Minute).Should(BeTrue(), "edit never gained the stackyard-promoter rules")
	g.Eventually(func() bool { return may(t, admin, ns, "update", "pulumi.com", "stacks", "") }).
		WithTimeout(time.Minute).Should(BeTrue(), "admin never gained the stackyard-editor rules")
	for _, c := range []client.Client{viewer, editor, admin} {
		for _, verb := range []string{"govern", "approve"} {
			if may(t, c, ns, verb, promo, "stages", "prod") {
				t.Errorf("a built-in role may %s stages", verb)
			}
		}
		if may(t, c, ns, "create", promo, "approvals", "") {
			t.Error("a built-in role may create approvals")
		}
	}
	if may(t, viewer, ns, "create", promo, "promotions", "") {
		t.Error("view may ask for promotions")
	}
}
