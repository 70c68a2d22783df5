package policy_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
)

// TestEditRecord: the webhook of config/webhook stamps who edited a
// governed Stack's spec, as the API server authenticated them, and the
// policy of config/policy/edit-record.yaml keeps the stamp truthful. Each
// user is a ServiceAccount authenticated by a bearer token only.
func TestEditRecord(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	g := NewWithT(t)
	alice := attacker(t, f.ns, "alice", stackRule("stacks", "get", "update", "patch"), govern("prod"))
	bob := attacker(t, f.ns, "bob", stackRule("stacks", "get", "update", "patch"), govern("prod"))
	mallory := attacker(t, f.ns, "mallory", stackRule("stacks", "get", "update", "patch"))
	aliceName, bobName, malloryName := whoAmI(t, alice), whoAmI(t, bob), whoAmI(t, mallory)
	key := client.ObjectKey{Namespace: f.ns, Name: "prod"}
	editor := func() (change.Editor, bool) {
		t.Helper()
		prod := &pulumiv1.Stack{}
		g.Expect(env.Client.Get(ctx, key, prod)).To(Succeed())
		ed, ok, err := change.EditorOf(prod)
		g.Expect(err).NotTo(HaveOccurred())
		return ed, ok
	}
	annotations := func(values map[string]any) client.Patch {
		return mergePatch(t, map[string]any{"metadata": map[string]any{"annotations": values}})
	}
	byKey, specKey := promotionv1alpha1.EditedByAnnotation, promotionv1alpha1.EditedSpecAnnotation

	// A governor's edit is stamped with their name, whatever they wrote
	// there: the webhook runs first.
	prod := &pulumiv1.Stack{}
	g.Expect(env.Client.Get(ctx, key, prod)).To(Succeed())
	eventually(t, func() error {
		return alice.Patch(ctx, prod.DeepCopy(), mergePatch(t, map[string]any{
			"metadata": map[string]any{"annotations": map[string]any{byKey: bobName}},
			"spec":     map[string]any{"config": map[string]any{"web:replicas": "3"}},
		}))
	}).Should(Succeed())
	ed, ok := editor()
	g.Expect(ok).To(BeTrue(), "the edit has no known author")
	g.Expect(ed.Username).To(Equal(aliceName))

	// Nobody writes another's name, in a write that changes the spec or
	// not, nor claims an edit they did not make.
	g.Expect(env.Client.Get(ctx, key, prod)).To(Succeed())
	g.Expect(mallory.Patch(ctx, prod.DeepCopy(), annotations(map[string]any{byKey: bobName}))).To(MatchError(ContainSubstring(
		"metadata.annotations[" + byKey + "]: records who edited the Stack, as the API server authenticated them; " +
			malloryName + ` may write only their own name there, not "` + bobName + `"`)))
	g.Expect(bob.Patch(ctx, prod.DeepCopy(), annotations(map[string]any{byKey: bobName}))).To(MatchError(ContainSubstring(
		"changes only in a write that changes the spec; " + bobName + " did not change it")))
	g.Expect(mallory.Patch(ctx, prod.DeepCopy(), annotations(map[string]any{specKey: "sha256:0"}))).To(MatchError(ContainSubstring(
		"may write only their own name there")))
	unchanged(t, &pulumiv1.Stack{}, prod)
	ed, ok = editor()
	g.Expect(ok && ed.Username == aliceName).To(BeTrue(), "the record changed: %+v", ed)

	// A promotion's pin of the commit keeps the editor of the rest.
	g.Expect(env.Client.Patch(ctx, prod.DeepCopy(), mergePatch(t, map[string]any{
		"spec": map[string]any{"commit": "fedcba9876543210fedcba9876543210fedcba98"}}))).To(Succeed())
	ed, ok = editor()
	g.Expect(ok && ed.Username == aliceName).To(BeTrue(), "a pin changed the editor: %+v, %v", ed, ok)

	// Another governor's edit is theirs.
	g.Expect(env.Client.Get(ctx, key, prod)).To(Succeed())
	g.Expect(bob.Patch(ctx, prod.DeepCopy(), mergePatch(t, map[string]any{
		"spec": map[string]any{"config": map[string]any{"web:replicas": "4"}}}))).To(Succeed())
	ed, ok = editor()
	g.Expect(ok && ed.Username == bobName).To(BeTrue(), "the second edit is not bob's: %+v, %v", ed, ok)

	// Removing the record leaves the edit with no known author.
	g.Expect(env.Client.Get(ctx, key, prod)).To(Succeed())
	g.Expect(mallory.Patch(ctx, prod.DeepCopy(), annotations(map[string]any{byKey: nil, specKey: nil}))).To(Succeed())
	_, ok = editor()
	g.Expect(ok).To(BeFalse(), "a removed record still names an editor")

	// An ungoverned Stack is not stamped.
	free := &pulumiv1.Stack{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "dev"}, free)).To(Succeed())
	free.Name, free.ResourceVersion, free.UID, free.Annotations = "free", "", "", nil
	g.Expect(mallory.Create(ctx, free)).To(MatchError(ContainSubstring("forbidden")), "mallory may not create Stacks")
	g.Expect(env.Client.Create(ctx, free)).To(Succeed())
	g.Expect(free.Annotations).NotTo(HaveKey(byKey))
}

// TestReadCheck: an edit of a governed Stack's spec that names a Secret or
// ConfigMap its author may not read is refused by the webhook of
// config/webhook/read-check.yaml, after the admission policies: a user
// without "govern" still hears about govern first. Each user is a
// ServiceAccount authenticated by a bearer token only.
func TestReadCheck(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	g := NewWithT(t)
	secrets := func(verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"prod-creds"}, Verbs: verbs}
	}
	alice := attacker(t, f.ns, "alice", stackRule("stacks", "get", "update", "patch"), govern("prod"))
	carol := attacker(t, f.ns, "carol", stackRule("stacks", "get", "update", "patch"), govern("prod"), secrets("get"))
	mallory := attacker(t, f.ns, "mallory", stackRule("stacks", "get", "update", "patch"), secrets("get"))
	dave := attacker(t, f.ns, "dave", stackRule("stacks", "get", "update", "patch"))
	aliceName := whoAmI(t, alice)
	prod := &pulumiv1.Stack{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "prod"}, prod)).To(Succeed())
	withSecret := mergePatch(t, map[string]any{"spec": map[string]any{"envRefs": map[string]any{
		"TOKEN": map[string]any{"type": "Secret", "secret": map[string]any{"name": "prod-creds", "key": "token"}}}}})

	eventually(t, func() error { return alice.Patch(ctx, prod.DeepCopy(), withSecret) }).Should(MatchError(ContainSubstring(
		"spec: Stack prod is governed by stage prod, and a change to it is previewed with everything it names; " +
			aliceName + ` may not read (the verb "get") Secret/prod-creds, which it names`)))
	unchanged(t, &pulumiv1.Stack{}, prod)
	// One who may update the Stack and read what the change names may
	// propose it: the operator holds it for a promotion.
	g.Expect(mallory.Patch(ctx, prod.DeepCopy(), withSecret, client.DryRunAll)).To(Succeed())
	// The policies answer first: a change of the source as well is
	// refused for want of govern, before anyone asks what it names.
	withSource := mergePatch(t, map[string]any{"spec": map[string]any{"commit": strings.Repeat("f", 40), "envRefs": map[string]any{
		"TOKEN": map[string]any{"type": "Secret", "secret": map[string]any{"name": "prod-creds", "key": "token"}}}}})
	g.Expect(dave.Patch(ctx, prod.DeepCopy(), withSource)).To(MatchError(ContainSubstring(
		sourceFieldsMsg+": Stack prod is governed by stage prod and changes only through its promotions")), "the policies answer first")

	// One who may read it may name it; then whoever edits the spec again
	// must be able to read it too, even for another field.
	g.Expect(carol.Patch(ctx, prod.DeepCopy(), withSecret)).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(prod), prod)).To(Succeed())
	g.Expect(alice.Patch(ctx, prod.DeepCopy(), mergePatch(t, map[string]any{"spec": map[string]any{"repoDir": "infra"}}))).
		To(MatchError(ContainSubstring("may not read (the verb \"get\") Secret/prod-creds")))
	// A promotion's pin of the commit is not an edit.
	g.Expect(env.Client.Patch(ctx, prod.DeepCopy(), mergePatch(t, map[string]any{
		"spec": map[string]any{"commit": "fedcba9876543210fedcba9876543210fedcba98"}}))).To(Succeed())
}
