// Package policy_test runs the admission policies of config/policy in the
// real API server, with real RBAC, acting as users through impersonation,
// and the admission webhook of config/webhook, which the test serves.
package policy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/editstamp"
	"github.com/stackyard/stackyard/internal/readcheck"
	"github.com/stackyard/stackyard/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	env, err = testenv.Start(testenv.Options{
		AddToScheme: []func(*k8sruntime.Scheme) error{promotionv1alpha1.AddToScheme, pulumiv1.AddToScheme, autov1alpha1.AddToScheme, notificationv1alpha1.AddToScheme},
		Webhooks: []string{
			filepath.Join(testenv.RepoRoot(), "config", "webhook", "edit-stamp.yaml"),
			filepath.Join(testenv.RepoRoot(), "config", "webhook", "read-check.yaml"),
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ctrllog.SetLogger(logr.Discard())
	if err := env.ServeWebhooks(ctx, func(srv webhook.Server) {
		editstamp.Register(srv, env.Scheme)
		readcheck.Register(srv, env.Scheme, env.Client)
	}); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	if err := env.InstallPolicies(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	return m.Run()
}

// as returns a client acting as user, granted verbs on the promotion
// kinds of ns (and nothing else).
func as(t *testing.T, ns, user string, rules ...rbacv1.PolicyRule) client.Client {
	t.Helper()
	return asMember(t, ns, user, nil, rules...)
}

// asMember returns a client acting as user, member of groups, granted
// verbs on the promotion kinds of ns (and nothing else).
func asMember(t *testing.T, ns, user string, groups []string, rules ...rbacv1.PolicyRule) client.Client {
	t.Helper()
	g := NewWithT(t)
	cfg, err := env.Impersonate(context.Background(), ns, user, groups, rules...)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

func rule(resource string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{promotionv1alpha1.GroupVersion.Group}, Resources: []string{resource}, Verbs: verbs}
}

// eventually retries an admission check until the API server has loaded
// the policies, which it does a moment after they are created.
func eventually(t *testing.T, f func() error) AsyncAssertion {
	return NewWithT(t).Eventually(f, 30*time.Second, 200*time.Millisecond)
}

// TestPromotionRequester: a Promotion must say truthfully who asked.
func TestPromotionRequester(t *testing.T) {
	ns := env.NewNamespace(t, "policy-")
	alice := as(t, ns, "alice", rule("promotions", "create"))
	robot := as(t, ns, "robot", rule("promotions", "create", "autopromote"))
	promotion := func(name, by string) *promotionv1alpha1.Promotion {
		return &promotionv1alpha1.Promotion{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       promotionv1alpha1.PromotionSpec{Stage: "qa", Release: "web-0123456789", RequestedBy: by},
		}
	}
	ctx := context.Background()
	eventually(t, func() error { return alice.Create(ctx, promotion("as-bob", "bob")) }).
		Should(MatchError(ContainSubstring(`spec.requestedBy: must be the name you are authenticated as, "alice"`)))
	NewWithT(t).Expect(alice.Create(ctx, promotion("empty", ""))).To(MatchError(ContainSubstring("spec.requestedBy")))
	NewWithT(t).Expect(alice.Create(ctx, promotion("as-alice", "alice"))).To(Succeed())
	NewWithT(t).Expect(alice.Create(ctx, promotion("alice-as-auto", promotionv1alpha1.RequestedByAutoPromotion))).
		To(MatchError(ContainSubstring("spec.requestedBy")), "auto-promotion needs the autopromote verb")
	NewWithT(t).Expect(robot.Create(ctx, promotion("auto", promotionv1alpha1.RequestedByAutoPromotion))).To(Succeed())
}

// TestStageGovernance: everything a Stage's spec says needs the verb
// govern, to create the stage, to change it and to delete it; its labels
// and annotations need only update.
func TestStageGovernance(t *testing.T) {
	ns := env.NewNamespace(t, "policy-")
	ctx := context.Background()
	editor := as(t, ns, "editor", rule("stages", "get", "create", "update", "delete"))
	governor := as(t, ns, "governor", rule("stages", "get", "create", "update", "delete", "govern"))
	stage := func(name string) *promotionv1alpha1.Stage {
		return &promotionv1alpha1.Stage{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: promotionv1alpha1.StageSpec{
				Pipeline: "web", Stacks: []promotionv1alpha1.StackBinding{{Name: name}},
				Sources: promotionv1alpha1.ReleaseSources{Direct: true},
			},
		}
	}
	eventually(t, func() error { return editor.Create(ctx, stage("plain")) }).
		Should(MatchError(ContainSubstring(`creating stage plain: deciding what stage plain deploys, and through which gates, needs the verb "govern" on stages.promotion.stackyard.dev, which editor is not allowed`)))

	g := NewWithT(t)
	plain := stage("plain")
	g.Expect(governor.Create(ctx, plain)).To(Succeed())
	g.Expect(editor.Get(ctx, client.ObjectKeyFromObject(plain), plain)).To(Succeed())
	plain.Labels = map[string]string{"team": "web"}
	g.Expect(editor.Update(ctx, plain)).To(Succeed(), "labels need no govern")

	// Each field of the spec is governed, and the message names it.
	for field, edit := range map[string]func(*promotionv1alpha1.StageSpec){
		"spec.stacks": func(s *promotionv1alpha1.StageSpec) {
			s.Stacks = append(s.Stacks, promotionv1alpha1.StackBinding{Name: "prod"})
		},
		"spec.stackSelector": func(s *promotionv1alpha1.StageSpec) {
			s.StackSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"fleet": "web"}}
		},
		"spec.sources": func(s *promotionv1alpha1.StageSpec) {
			s.Sources = promotionv1alpha1.ReleaseSources{Stages: []string{"dev"}}
		},
		"spec.previewOnly": func(s *promotionv1alpha1.StageSpec) { s.PreviewOnly = true },
		"spec.approval":    func(s *promotionv1alpha1.StageSpec) { s.Approval = &promotionv1alpha1.ApprovalPolicy{Required: 1} },
		"spec.freeze":      func(s *promotionv1alpha1.StageSpec) { s.Freeze = &promotionv1alpha1.Freeze{Reason: "release week"} },
		"spec.verification": func(s *promotionv1alpha1.StageSpec) {
			s.Verification = &promotionv1alpha1.Verification{RollbackOnFailure: true}
		},
		"spec.autoPromotionOptions": func(s *promotionv1alpha1.StageSpec) {
			s.AutoPromotionOptions = &promotionv1alpha1.AutoPromotionOptions{Enabled: true}
		},
		"spec.policies": func(s *promotionv1alpha1.StageSpec) {
			s.Policies = []promotionv1alpha1.PolicyRule{{Name: "no-deletes", Expression: "counts.delete > 0", Action: promotionv1alpha1.PolicyRefuse}}
		},
	} {
		edited := plain.DeepCopy()
		edit(&edited.Spec)
		g.Expect(editor.Update(ctx, edited)).To(MatchError(ContainSubstring(field+`: deciding what stage plain deploys`)), field)
	}

	// A selector a governor set is governed as it changes, and so is a
	// stage that names none of its Stacks.
	g.Expect(governor.Get(ctx, client.ObjectKeyFromObject(plain), plain)).To(Succeed())
	plain.Spec.StackSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"fleet": "web"}}
	g.Expect(governor.Update(ctx, plain)).To(Succeed())
	widened := plain.DeepCopy()
	widened.Spec.StackSelector = &metav1.LabelSelector{}
	g.Expect(editor.Update(ctx, widened)).To(MatchError(ContainSubstring(`spec.stackSelector: deciding what stage plain deploys`)))
	g.Expect(governor.Get(ctx, client.ObjectKeyFromObject(plain), plain)).To(Succeed())
	plain.Spec.Stacks = nil
	g.Expect(governor.Update(ctx, plain)).To(Succeed())
	named := plain.DeepCopy()
	named.Spec.Stacks = []promotionv1alpha1.StackBinding{{Name: "prod"}}
	g.Expect(editor.Update(ctx, named)).To(MatchError(ContainSubstring(`spec.stacks: deciding what stage plain deploys`)))

	// A governor lifts a freeze; an editor cannot put it back, nor drop
	// the stage to make it again without its gates.
	g.Expect(governor.Get(ctx, client.ObjectKeyFromObject(plain), plain)).To(Succeed())
	plain.Spec.Freeze = &promotionv1alpha1.Freeze{Reason: "release week"}
	plain.Spec.Approval = &promotionv1alpha1.ApprovalPolicy{Required: 2}
	g.Expect(governor.Update(ctx, plain)).To(Succeed())
	plain.Spec.Freeze = nil
	g.Expect(governor.Update(ctx, plain)).To(Succeed())
	// Nor weaken a policy rule the governor set.
	g.Expect(governor.Get(ctx, client.ObjectKeyFromObject(plain), plain)).To(Succeed())
	plain.Spec.Policies = []promotionv1alpha1.PolicyRule{{
		Name: "db", Expression: "changes.exists(c, c.op == 'delete')", Action: promotionv1alpha1.PolicyRequireApproval,
		Approval: &promotionv1alpha1.RuleApproval{Required: 2, From: []promotionv1alpha1.Approver{{Group: "dba"}}},
	}}
	g.Expect(governor.Update(ctx, plain)).To(Succeed())
	weakened := plain.DeepCopy()
	weakened.Spec.Policies[0].Expression = "false"
	g.Expect(editor.Update(ctx, weakened)).To(MatchError(ContainSubstring(`spec.policies: deciding what stage plain deploys`)))
	weakened = plain.DeepCopy()
	weakened.Spec.Policies[0].Approval.Required = 1
	g.Expect(editor.Update(ctx, weakened)).To(MatchError(ContainSubstring(`spec.policies: deciding what stage plain deploys`)))
	g.Expect(editor.Delete(ctx, plain)).To(MatchError(ContainSubstring("deleting stage plain: deciding what stage plain deploys")))
	g.Expect(governor.Get(ctx, client.ObjectKeyFromObject(plain), plain)).To(Succeed())
	g.Expect(plain.Spec.Approval).NotTo(BeNil(), "the gate is still there")
	g.Expect(governor.Delete(ctx, plain)).To(Succeed())
}

// TestApprovals: an Approval is accepted only from the user and groups
// the API server authenticated, allowed the verb approve on its stage.
func TestApprovals(t *testing.T) {
	ns := env.NewNamespace(t, "policy-")
	ctx := context.Background()
	approvals := rule("approvals", "create", "get", "update")
	alice := asMember(t, ns, "alice", []string{"qa"}, approvals, rule("stages", "approve"))
	bob := asMember(t, ns, "bob", []string{"qa"}, approvals)
	carol := asMember(t, ns, "carol", nil, approvals, rbacv1.PolicyRule{
		APIGroups: []string{promotionv1alpha1.GroupVersion.Group}, Resources: []string{"stages"}, ResourceNames: []string{"dev"}, Verbs: []string{"approve"},
	})
	approval := func(name, user string, groups []string) *promotionv1alpha1.Approval {
		return &promotionv1alpha1.Approval{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: promotionv1alpha1.ApprovalSpec{
				Promotion: "prod-1", Stage: "prod", PlanDigest: "sha256:0123", Decision: promotionv1alpha1.Approve, User: user, Groups: groups,
			},
		}
	}
	g := NewWithT(t)
	aliceGroups := groupsOf(t, alice)
	g.Expect(aliceGroups).To(ContainElement("qa"))

	// Refusals first: the policy may take a moment to load, and a
	// success before it has would prove nothing.
	eventually(t, func() error { return bob.Create(ctx, approval("bob", "bob", groupsOf(t, bob))) }).
		Should(MatchError(ContainSubstring(`spec.stage: deciding on a promotion into stage prod needs the verb "approve" on stages.promotion.stackyard.dev, which bob is not allowed`)))
	g.Expect(carol.Create(ctx, approval("carol", "carol", groupsOf(t, carol)))).To(MatchError(ContainSubstring("spec.stage")),
		"carol may approve stage dev only")
	g.Expect(alice.Create(ctx, approval("as-bob", "bob", aliceGroups))).To(MatchError(ContainSubstring(`spec.user: must be the name you are authenticated as, "alice"`)))
	g.Expect(alice.Create(ctx, approval("more-groups", "alice", append([]string{"security"}, aliceGroups...)))).
		To(MatchError(ContainSubstring("spec.groups: must be the groups you are authenticated with")))
	g.Expect(alice.Create(ctx, approval("no-groups", "alice", nil))).To(MatchError(ContainSubstring("spec.groups")))

	// The groups are compared as a set: order does not matter.
	reversed := slices.Clone(aliceGroups)
	slices.Reverse(reversed)
	given := approval("alice", "alice", reversed)
	g.Expect(alice.Create(ctx, given)).To(Succeed())
	carolOnDev := approval("carol-dev", "carol", groupsOf(t, carol))
	carolOnDev.Spec.Stage = "dev"
	g.Expect(carol.Create(ctx, carolOnDev)).To(Succeed())

	// A rejection needs a reason, and a decision never changes.
	reject := approval("alice-rejects", "alice", aliceGroups)
	reject.Spec.Decision = promotionv1alpha1.Reject
	g.Expect(alice.Create(ctx, reject)).To(MatchError(ContainSubstring("spec.comment: a rejection needs a reason")))
	reject.Spec.Comment = "the plan replaces the database"
	g.Expect(alice.Create(ctx, reject)).To(Succeed())
	given.Spec.Decision = promotionv1alpha1.Reject
	given.Spec.Comment = "changed my mind"
	g.Expect(alice.Update(ctx, given)).To(MatchError(ContainSubstring("an Approval is a record")))
}

// groupsOf asks the API server which groups c is authenticated with.
func groupsOf(t *testing.T, c client.Client) []string {
	t.Helper()
	review := &authenticationv1.SelfSubjectReview{}
	NewWithT(t).Expect(c.Create(context.Background(), review)).To(Succeed())
	return review.Status.UserInfo.Groups
}
