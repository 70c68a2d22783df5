package policy_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// TestAttackPipelinePullRequests: previewing pull requests runs their
// programs with the Stacks' credentials, so a user who may edit Pipelines
// and does not govern them can neither turn it on, nor, once it is on,
// point the Pipeline at another repository; and naming a Secret the user
// cannot read, for git or for the forge, is refused.
func TestAttackPipelinePullRequests(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	g := NewWithT(t)
	mustCreate(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "cloud-admin"}, StringData: map[string]string{"token": "s3cr3t"}})
	mustCreate(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "forge"}, StringData: map[string]string{"token": "f0rge"}})
	readForge := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"forge"}, Verbs: []string{"get"}}
	mallory := attacker(t, f.ns, "mallory", rule("pipelines", "get", "create", "update", "patch"), rule("pipelines/status", "update", "patch"), readForge)
	previews := &promotionv1alpha1.PullRequestPreviews{Forge: promotionv1alpha1.ForgeGitea, APIURL: "https://git.example.invalid/api/v1",
		SecretRef: corev1.LocalObjectReference{Name: "forge"}, Stages: []string{"prod"}}
	pipeline := func(name string) *promotionv1alpha1.Pipeline {
		p := &promotionv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}}
		p.Spec.Git = promotionv1alpha1.GitSubscription{RepoURL: "https://git.example.invalid/web.git", Branch: "main"}
		return p
	}
	withPreviews := pipeline("previews")
	withPreviews.Spec.PullRequests = previews
	eventually(t, func() error { return mallory.Create(ctx, withPreviews.DeepCopy()) }).Should(MatchError(ContainSubstring(
		`spec.pullRequests: previewing the pull requests of pipeline previews runs their programs with the credentials of the Stacks previewed, which needs the verb "govern" on pipelines.promotion.stackyard.dev`)))
	stolen := pipeline("stolen")
	stolen.Spec.Git.SecretRef = &corev1.LocalObjectReference{Name: "cloud-admin"}
	g.Expect(mallory.Create(ctx, stolen)).To(MatchError(ContainSubstring(
		`spec.git.secretRef: the operator uses the Secret cloud-admin on behalf of this Pipeline, which needs the verb "get" on that Secret`)))

	// Made by the administrator: its previews, and the repository they
	// come from, stay out of the user's reach; its labels do not.
	mustCreate(t, withPreviews)
	before := withPreviews.DeepCopy()
	for _, patch := range []map[string]any{
		{"spec": map[string]any{"pullRequests": map[string]any{"allowForks": true}}},
		{"spec": map[string]any{"pullRequests": nil}},
		{"spec": map[string]any{"git": map[string]any{"repoURL": "https://attacker.example.invalid/web.git"}}},
	} {
		g.Expect(mallory.Patch(ctx, withPreviews.DeepCopy(), mergePatch(t, patch))).To(MatchError(ContainSubstring(`needs the verb "govern" on pipelines`)), "%v", patch)
	}
	// Its status names the comment the operator edits with the forge's
	// token: pointing it at someone else's comment is a record's change.
	g.Expect(mallory.Status().Patch(ctx, withPreviews.DeepCopy(), mergePatch(t, map[string]any{"status": map[string]any{"pullRequests": map[string]any{
		"pullRequests": []any{map[string]any{"number": 1, "head": "0123456789abcdef0123456789abcdef01234567", "phase": "Previewed", "commentID": "42"}},
	}}}))).To(MatchError(ContainSubstring("pipelines/status: a record of change management")))
	unchanged(t, &promotionv1alpha1.Pipeline{}, before)
	g.Expect(mallory.Patch(ctx, withPreviews.DeepCopy(), mergePatch(t, map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": "web"}}}))).To(Succeed())

	// Governing the pipeline is not enough: the Stacks previewed are the
	// stages'. Who governs both, and may read the forge's Secret, turns
	// previews on.
	governed := func() *promotionv1alpha1.Pipeline {
		p := pipeline("governed")
		p.Spec.PullRequests = previews
		return p
	}
	pipelineGovernor := attacker(t, f.ns, "pipeline-governor", rule("pipelines", "get", "create", "update", "patch", "govern"), readForge)
	g.Expect(pipelineGovernor.Create(ctx, governed())).To(MatchError(ContainSubstring(
		`spec.pullRequests.stages: previewing pull requests against the Stacks of a stage hands their credentials to the pull requests' programs, which needs the verb "govern" on each stage named`)))
	governor := attacker(t, f.ns, "governor", rule("pipelines", "get", "create", "update", "patch", "govern"), govern("prod"), readForge)
	g.Expect(governor.Create(ctx, governed())).To(Succeed())

	// Review stacks: the operator makes a Stack of the template for each
	// pull request. Turning them on needs, beside govern, the right to
	// make Stacks, and to read every Secret the template names.
	reviews := func(secret string) client.Patch {
		template := map[string]any{"stack": "review", "backend": "file:///tmp/state"}
		if secret != "" {
			template["envRefs"] = map[string]any{"TOKEN": map[string]any{"type": "Secret", "secret": map[string]any{"name": secret, "key": "token"}}}
		}
		return mergePatch(t, map[string]any{"spec": map[string]any{"pullRequests": map[string]any{"reviewStacks": map[string]any{"template": template}}}})
	}
	current := governed()
	g.Expect(mallory.Patch(ctx, current.DeepCopy(), reviews(""))).To(MatchError(ContainSubstring(`needs the verb "govern" on pipelines`)))
	g.Expect(governor.Patch(ctx, current.DeepCopy(), reviews(""))).To(MatchError(ContainSubstring(
		`spec.pullRequests.reviewStacks: the operator makes a Stack from the template for each pull request of the repository (and forks, with allowForks), which needs the verb "create" on stacks.pulumi.com`)))
	reviewer := attacker(t, f.ns, "reviewer", rule("pipelines", "get", "create", "update", "patch", "govern"), govern("prod"), readForge,
		stackRule("stacks", "create"))
	reviewerName := whoAmI(t, reviewer)
	g.Expect(reviewer.Patch(ctx, current.DeepCopy(), reviews("cloud-admin"))).To(MatchError(ContainSubstring(
		"spec.pullRequests.reviewStacks.template: pipeline governed makes a Stack of it for every pull request, " +
			"which runs the pull request's program with everything the template names; " + reviewerName + ` may not read (the verb "get") Secret/cloud-admin`)))
	g.Expect(reviewer.Patch(ctx, current.DeepCopy(), reviews("forge"))).To(Succeed())
	// Once they are on, the template's credentials go wherever spec.git
	// points: pointing it elsewhere, or letting forks in, is checked as
	// the template is.
	g.Expect(env.Client.Patch(ctx, current.DeepCopy(), reviews("cloud-admin"))).To(Succeed())
	for _, patch := range []map[string]any{
		{"spec": map[string]any{"git": map[string]any{"repoURL": "https://attacker.example.invalid/web.git"}}},
		{"spec": map[string]any{"pullRequests": map[string]any{"allowForks": true}}},
	} {
		g.Expect(reviewer.Patch(ctx, current.DeepCopy(), mergePatch(t, patch))).To(MatchError(ContainSubstring(
			reviewerName+` may not read (the verb "get") Secret/cloud-admin`)), "%v", patch)
		g.Expect(governor.Patch(ctx, current.DeepCopy(), mergePatch(t, patch))).To(MatchError(ContainSubstring(
			`needs the verb "create" on stacks.pulumi.com`)), "%v", patch)
	}
	// The template never carries a source: the operator sets it.
	g.Expect(reviewer.Patch(ctx, current.DeepCopy(), mergePatch(t, map[string]any{"spec": map[string]any{"pullRequests": map[string]any{
		"reviewStacks": map[string]any{"template": map[string]any{"branch": "main"}}}}}))).To(MatchError(ContainSubstring(
		"template: the operator sets the source of a review stack")))
}

// TestAttackReviewStackStage: a review stack (controlled by a Pipeline)
// deploys whatever a pull request holds, so nobody, not even a governor
// of the stage, binds one to a stage.
func TestAttackReviewStackStage(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// The policy reads the controller's kind; the Pipeline need not exist.
	review := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "web-pr-1",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: promotionv1alpha1.GroupVersion.String(), Kind: "Pipeline", Name: "web",
			UID: "6f9d3a52-0000-4000-8000-000000000001", Controller: ptr.To(true)}}},
		Spec: shared.StackSpec{Stack: "review-pr-1", GitSource: &shared.GitSource{ProjectRepo: "https://git.example.invalid/web.git", Commit: strings.Repeat("a", 40)}}}
	mustCreate(t, review.DeepCopy())
	governor := attacker(t, f.ns, "governor", stackRule("stacks", "get", "update", "patch"), govern())
	eventually(t, func() error {
		return governor.Patch(ctx, review.DeepCopy(), mergePatch(t, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
			promotionv1alpha1.AuthorizedStageAnnotation: "prod"}}}))
	}).Should(MatchError(ContainSubstring("Stack web-pr-1 is a review stack of a Pipeline (its controller), which deploys the pull requests' programs: it is never governed by a stage")))
}

// TestAttackPipelineSource: what becomes a release is the pipeline's
// governors' choice, previews or not. A user who may edit Pipelines
// cannot point one at another branch or repository, nor delete it to make
// one anew under its name for its stages to follow; she may still make a
// Pipeline of her own and label one. Found by TestAttackSurface
// (test/surface).
func TestAttackPipelineSource(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	g := NewWithT(t)
	mallory := attacker(t, f.ns, "mallory", rule("pipelines", "get", "create", "update", "patch", "delete"))
	web := &promotionv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "web"},
		Spec: promotionv1alpha1.PipelineSpec{Git: promotionv1alpha1.GitSubscription{RepoURL: "https://git.example.invalid/web.git", Branch: "main"}}}
	mustCreate(t, web)
	before := web.DeepCopy()
	eventually(t, func() error {
		return mallory.Patch(ctx, web.DeepCopy(), mergePatch(t, map[string]any{"spec": map[string]any{"git": map[string]any{"branch": "unmerged"}}}))
	}).Should(MatchError(ContainSubstring(`spec.git: what becomes a release of pipeline web is its governors' choice`)))
	for _, git := range []map[string]any{
		{"repoURL": "https://attacker.example.invalid/web.git"},
		{"includePaths": []any{"nothing"}},
		{"commitSelectionStrategy": "SemVer", "semverConstraint": ">=0.0.0"},
	} {
		g.Expect(mallory.Patch(ctx, web.DeepCopy(), mergePatch(t, map[string]any{"spec": map[string]any{"git": git}}))).To(
			MatchError(ContainSubstring(`needs the verb "govern" on pipelines`)), "%v", git)
	}
	g.Expect(mallory.Delete(ctx, web.DeepCopy())).To(MatchError(ContainSubstring("deleting pipeline web (its stages would follow")))
	unchanged(t, &promotionv1alpha1.Pipeline{}, before)
	g.Expect(mallory.Patch(ctx, web.DeepCopy(), mergePatch(t, map[string]any{"spec": map[string]any{"interval": "5m"}}))).To(Succeed())
	mine := &promotionv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "mine"},
		Spec: promotionv1alpha1.PipelineSpec{Git: promotionv1alpha1.GitSubscription{RepoURL: "https://git.example.invalid/web.git", Branch: "unmerged"}}}
	g.Expect(mallory.Create(ctx, mine)).To(Succeed(), "a Pipeline of her own feeds only stages that name it, which need govern")
	governor := attacker(t, f.ns, "governor", rule("pipelines", "get", "update", "patch", "delete", "govern"))
	g.Expect(governor.Patch(ctx, web.DeepCopy(), mergePatch(t, map[string]any{"spec": map[string]any{"git": map[string]any{"branch": "release"}}}))).To(Succeed())
	g.Expect(governor.Delete(ctx, web.DeepCopy())).To(Succeed())
}

// whoAmI is the user name c is authenticated as.
