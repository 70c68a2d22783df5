package policy_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
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
