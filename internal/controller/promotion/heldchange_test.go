package promotion_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/pipelinectl"
)

// TestHeldChangePromoted: a config change to a governed Stack, made by
// someone allowed only to update Stacks (as Argo CD would sync it), is
// held; the stage asks for a promotion of it by itself, which previews
// the Stack with the change and waits for an approval. The approval of
// the change's author does not count; another's does, and then the change
// is deployed. A newer edit supersedes a pending change's promotion, and
// reverting the spec withdraws it.
func TestHeldChangePromoted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	repo := newProgramRepo(t)
	c1 := repo.Commit("main", map[string]string{"Pulumi.yaml": projectReading("v1", "message", false)})
	s, file := gitStack(t, ns, "web", repo.URL, c1)
	s.Spec.Config["web:message"] = apiextensionsv1.JSON{Raw: []byte(`"first"`)}
	// A rule over the preview asks an approval when the page changes:
	// a release that changes nothing passes, a config change that does
	// must be approved, as a code change would.
	prod := stage(ns, "prod", []string{"web"}, func(spec *promotionv1alpha1.StageSpec) {
		spec.Policies = []promotionv1alpha1.PolicyRule{{
			Name: "page-update", Expression: pageUpdate, Action: promotionv1alpha1.PolicyRequireApproval, Message: "the page changes",
			Approval: &promotionv1alpha1.RuleApproval{Required: 1},
		}}
	})
	consent([]client.Object{s, prod})
	create(t, s)
	deployed(t, ns, "web", c1)
	create(t, pipeline(ns, repo.URL))
	create(t, release(ns, "r1", c1, time.Now()))
	create(t, prod)

	decide := allow("approvals", "create")
	// Alice may approve, and update Stacks, and nothing more there: she
	// changes the config below, as a GitOps sync would.
	cfg, err := env.Impersonate(ctx, ns, "alice", nil, allow("stages", "get", "approve"), allow("promotions", "get"), decide,
		rbacv1.PolicyRule{APIGroups: []string{"pulumi.com"}, Resources: []string{"stacks"}, Verbs: []string{"get", "update", "patch"}})
	g.Expect(err).NotTo(HaveOccurred())
	alice, err := pipelinectl.New(cfg, ns)
	g.Expect(err).NotTo(HaveOccurred())
	editor, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	bob := actAs(t, ns, "bob", nil, allow("stages", "get", "approve"), allow("promotions", "get", "create"), decide,
		rbacv1.PolicyRule{APIGroups: []string{"pulumi.com"}, Resources: []string{"stacks"}, Verbs: []string{"get"}})
	approve := func(who *pipelinectl.Client, p string) {
		t.Helper()
		_, err := who.Decide(ctx, pipelinectl.Decision{Promotion: p, Comment: "looks right"})
		g.Expect(err).NotTo(HaveOccurred())
	}
	// The stage runs r1, which changes nothing: no approval is asked.
	first, err := bob.Promote(ctx, pipelinectl.Request{Stage: "prod", Release: "r1", Reason: "the first release"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitFinished(t, ns, first.Name, 2*opTimeout).Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded))
	g.Expect(readFile(g, file)).To(Equal("v1-first"))

	// Alice's edit is a server-side apply of the manifest's config, as
	// Argo CD syncs with ServerSideApply=true; she also writes what the
	// operator's webhook would stamp (it is not served in this suite),
	// which the policies let her write with her own name only.
	edit := func(message string) string {
		t.Helper()
		cur := &pulumiv1.Stack{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, cur)).To(Succeed())
		cur.Spec.Config["web:message"] = apiextensionsv1.JSON{Raw: []byte(strconv.Quote(message))}
		g.Expect(change.StampEdit(cur, "alice")).To(Succeed())
		manifest := map[string]any{
			"apiVersion": pulumiv1.GroupVersion.String(), "kind": "Stack",
			"metadata": map[string]any{"name": "web", "namespace": ns, "annotations": map[string]any{
				promotionv1alpha1.EditedByAnnotation:   cur.Annotations[promotionv1alpha1.EditedByAnnotation],
				promotionv1alpha1.EditedSpecAnnotation: cur.Annotations[promotionv1alpha1.EditedSpecAnnotation],
			}},
			"spec": map[string]any{"config": map[string]any{"web:message": message}},
		}
		g.Expect(editor.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: manifest}),
			client.FieldOwner("argocd-controller"), client.ForceOwnership)).To(Succeed())
		digest, err := change.SpecDigest(cur)
		g.Expect(err).NotTo(HaveOccurred())
		return digest
	}
	heldPromotion := func(digest string) *promotionv1alpha1.Promotion {
		return &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: change.HeldChangeName("prod", "web", digest)}}
	}

	second := edit("second")
	held := heldPromotion(second)
	waitMessage(t, held, "waiting for approval: policy page-update needs 1 approval: 0 so far")
	g.Expect(held.Spec.Release).To(Equal("r1"))
	g.Expect(held.Spec.HeldChange).To(Equal(&promotionv1alpha1.HeldChangeRef{Stack: "web", Digest: second}))
	g.Expect(previewsOf(g, held)).To(HaveLen(1), "a held change's promotion previews its Stack alone")
	g.Expect(readFile(g, file)).To(Equal("v1-first"), "the held change was deployed before its approval")
	// What the approver reads: the change, field by field, and its author.
	review, err := bob.Review(ctx, held.Name, false)
	g.Expect(err).NotTo(HaveOccurred())
	var text strings.Builder
	g.Expect(pipelinectl.WriteReview(&text, review)).To(Succeed())
	g.Expect(text.String()).To(ContainSubstring("held change of Stack web (generation "))
	g.Expect(text.String()).To(ContainSubstring("previews not shown: you may not list StackPromotions in namespace "+ns),
		"bob's role, written before StackPromotions, lets him read promotions only")
	g.Expect(text.String()).To(ContainSubstring(`, made by alice:` + "\n" + `  ~ config["web:message"]: "first" => "second"`))
	approve(alice, held.Name)
	waitMessage(t, held, "waiting for approval: policy page-update needs 1 approval: 0 so far; not counted: alice (made the change)")
	approve(bob, held.Name)
	g.Expect(waitFinished(t, ns, held.Name, 2*opTimeout).Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded))
	g.Expect(readFile(g, file)).To(Equal("v1-second"))
	waitFor(t, &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, opTimeout, func(g Gomega, st *pulumiv1.Stack) {
		g.Expect(st.Status.HeldSpec).To(BeNil())
		a := st.Status.ApprovedSpec
		g.Expect(a).NotTo(BeNil())
		g.Expect([]any{a.Digest, a.Generation, a.By, a.Promotion}).To(Equal([]any{second, st.Generation, shared.ApprovedPromotion, held.Name}))
	})

	// A newer edit supersedes a pending change's promotion; a revert
	// withdraws the newer one.
	third := edit("third")
	pending := heldPromotion(third)
	waitMessage(t, pending, "waiting for approval: policy page-update needs 1 approval: 0 so far")
	fourth := edit("fourth")
	superseded := waitFinished(t, ns, pending.Name, opTimeout)
	g.Expect(superseded.Status.Phase).To(Equal(promotionv1alpha1.PromotionAborted))
	g.Expect(superseded.Status.EndReason).To(Equal(promotionv1alpha1.EndReasonSuperseded))
	newest := heldPromotion(fourth)
	waitMessage(t, newest, "waiting for approval: policy page-update needs 1 approval: 0 so far")
	edit("second")
	withdrawn := waitFinished(t, ns, newest.Name, opTimeout)
	g.Expect(withdrawn.Status.Phase).To(Equal(promotionv1alpha1.PromotionAborted))
	g.Expect(withdrawn.Status.EndReason).To(Equal(promotionv1alpha1.EndReasonWithdrawn))
	g.Expect(readFile(g, file)).To(Equal("v1-second"), "a withdrawn change was deployed")

	// A rejected change leaves the old value running, and the Stack
	// keeps saying that its spec differs; it is not asked for again.
	sixth := edit("sixth")
	rejected := heldPromotion(sixth)
	waitMessage(t, rejected, "waiting for approval: policy page-update needs 1 approval: 0 so far")
	_, err = bob.Decide(ctx, pipelinectl.Decision{Promotion: rejected.Name, Reject: true, Comment: "not this value"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitFinished(t, ns, rejected.Name, opTimeout).Status.Phase).To(Equal(promotionv1alpha1.PromotionFailed))
	g.Consistently(func(g Gomega) {
		st := &pulumiv1.Stack{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, st)).To(Succeed())
		g.Expect(st.Status.HeldSpec).NotTo(BeNil())
		g.Expect(st.Status.HeldSpec.Digest).To(Equal(sixth))
		var ps promotionv1alpha1.PromotionList
		g.Expect(env.Client.List(ctx, &ps, client.InNamespace(ns))).To(Succeed())
		asked := 0
		for _, p := range ps.Items {
			if h := p.Spec.HeldChange; h != nil && h.Digest == sixth {
				asked++
			}
		}
		g.Expect(asked).To(Equal(1), "a rejected change was asked for again")
	}, 3*time.Second, 250*time.Millisecond).Should(Succeed())
	g.Expect(readFile(g, file)).To(Equal("v1-second"), "a rejected change was deployed")

	// Whoever may ask for promotions may write spec.heldChange; it does
	// not carry another release to the Stack.
	c2 := repo.Commit("main", map[string]string{"Pulumi.yaml": projectReading("v2", "message", false)})
	create(t, release(ns, "r2", c2, time.Now()))
	crafted := &promotionv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bob-r2-as-held"},
		Spec: promotionv1alpha1.PromotionSpec{Stage: "prod", Release: "r2", RequestedBy: "bob",
			HeldChange: &promotionv1alpha1.HeldChangeRef{Stack: "web", Digest: sixth}},
	}
	g.Expect(bob.Client.Create(ctx, crafted)).To(Succeed())
	refused := waitFinished(t, ns, crafted.Name, opTimeout)
	g.Expect(refused.Status.Phase).To(Equal(promotionv1alpha1.PromotionAborted))
	g.Expect(refused.Status.Message).To(ContainSubstring("spec.release: a promotion of a held change deploys the release stage prod runs, not r2"))
	g.Expect(readFile(g, file)).To(Equal("v1-second"))
}
