package promotion_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/controller/promotion"
)

// argoManager is the field manager Argo CD applies with.
const argoManager = "argocd-controller"

// TestArgoCDSyncKeepsThePromotedCommit keeps a Stack's manifest in "git"
// and applies it as Argo CD does (server-side apply, forced, under its own
// field manager). After a promotion, a sync with ignoreDifferences for the
// manager stackyard-promotion and RespectIgnoreDifferences=true applies
// the manifest without spec.commit, and the promoted commit stays; a sync
// without them would put the manifest's commit back.
func TestArgoCDSyncKeepsThePromotedCommit(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	repo := newProgramRepo(t)
	c0, c1 := repo.commit("v0"), repo.commit("v1")

	stack, file := gitStack(t, ns, "web", repo.URL, c0)
	manifest := manifestOf(g, stack)
	sync := func(m *unstructured.Unstructured, opts ...client.ApplyOption) {
		t.Helper()
		opts = append(opts, client.FieldOwner(argoManager), client.ForceOwnership)
		g.Expect(env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(m.DeepCopy()), opts...)).To(Succeed())
	}
	sync(manifest)
	create(t, pipeline(ns, repo.URL))
	create(t, release(ns, "r1", c1, metav1.Now().Time))
	create(t, stage(ns, "prod", []string{"web"}, nil))
	create(t, askFor(ns, "prod-r1", "prod", "r1", false))
	p := waitFinished(t, ns, "prod-r1", opTimeout)
	g.Expect(p.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), p.Status.Message)
	g.Expect(p.Status.Stacks).To(ConsistOf(SatisfyAll(HaveField("PreviousCommit", c0), HaveField("Commit", c1))))
	g.Expect(readFile(g, file)).To(Equal("v1"))

	live := &pulumiv1.Stack{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stack), live)).To(Succeed())
	g.Expect(commitManagers(live)).To(ConsistOf(promotion.FieldManager), "spec.commit belongs to the promotion alone")
	generation := live.Generation

	// Argo CD with RespectIgnoreDifferences leaves the ignored field out of
	// what it applies.
	withoutCommit := manifest.DeepCopy()
	unstructured.RemoveNestedField(withoutCommit.Object, "spec", "commit")
	sync(withoutCommit)
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stack), live)).To(Succeed())
	g.Expect(live.Spec.Commit).To(Equal(c1), "the sync reverted the promoted commit")
	g.Expect(live.Generation).To(Equal(generation), "the sync changed the Stack")

	// Without ignoreDifferences, a sync would take the commit back (shown
	// by a dry run, so that nothing is redeployed).
	dry := manifest.DeepCopy()
	g.Expect(env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(dry),
		client.FieldOwner(argoManager), client.ForceOwnership, client.DryRunAll)).To(Succeed())
	commit, _, _ := unstructured.NestedString(dry.Object, "spec", "commit")
	g.Expect(commit).To(Equal(c0))
}

// manifestOf is the Stack as Argo CD would apply it from git.
func manifestOf(g Gomega, stack *pulumiv1.Stack) *unstructured.Unstructured {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(stack)
	g.Expect(err).NotTo(HaveOccurred())
	m := &unstructured.Unstructured{Object: obj}
	m.SetAPIVersion(pulumiv1.GroupVersion.String())
	m.SetKind("Stack")
	unstructured.RemoveNestedField(m.Object, "status")
	unstructured.RemoveNestedField(m.Object, "metadata", "creationTimestamp")
	return m
}

// commitManagers are the field managers that own spec.commit of stack.
func commitManagers(stack *pulumiv1.Stack) []string {
	var out []string
	for _, mf := range stack.ManagedFields {
		if mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), `"f:commit"`) {
			out = append(out, mf.Manager)
		}
	}
	return out
}
