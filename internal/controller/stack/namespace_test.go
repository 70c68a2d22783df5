package stack_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/controller/stack"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/test/argocd"
)

// TestNamespaceTerminating deletes the namespace of a Stack with
// destroyOnFinalize before the Stack itself. The API server then refuses the
// destroy Update, so the Stack cannot be finalized by the operator: it must
// say so (Stalled=True, reason NamespaceTerminating, a message telling the
// human what to do) instead of retrying forever, Argo CD shows it as
// Progressing (being deleted), and removing the finalizer as the message
// advises lets it go, leaving the resources in place.
//
// envtest runs no namespace controller, so the namespace stays Terminating
// for the rest of the run; that is what makes the order deterministic.
func TestNamespaceTerminating(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, target := programStack(t, "site", func(s *shared.StackSpec) { s.DestroyOnFinalize = true })
	ns := s.Namespace
	waitStack(t, ns, "site", opTimeout, ready)
	g.Expect(readFile(g, target)).To(Equal("from a Program"))

	// The namespace goes first and is Terminating before the Stack is
	// deleted, so the destroy can never be created.
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	g.Expect(env.Client.Delete(ctx, namespace)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: ns}, namespace)).To(Succeed())
		g.Expect(namespace.Status.Phase).To(Equal(corev1.NamespaceTerminating))
	}, opTimeout, 100*time.Millisecond).Should(Succeed())
	g.Expect(env.Client.Delete(ctx, s)).To(Succeed())

	s = waitStack(t, ns, "site", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		g.Expect(s.DeletionTimestamp).NotTo(BeNil())
		g.Expect(sreconcile.IsStalled(s.Status.Conditions)).To(BeTrue(), "not Stalled")
	})
	stalled := findCondition(s, "Stalled")
	g.Expect(stalled.Reason).To(Equal(pulumiv1.NamespaceTerminatingReason))
	g.Expect(stalled.Message).To(ContainSubstring("namespace is being deleted"))
	g.Expect(stalled.Message).To(ContainSubstring("delete the Stack before its namespace"))
	g.Expect(stalled.Message).To(ContainSubstring("remove the finalizer " + stack.Finalizer))
	g.Expect(sreconcile.IsReady(s.Status.Conditions)).To(BeFalse())
	g.Expect(s.Status.CurrentUpdate).To(BeNil(), "no destroy could start")
	health, err := argocd.StackHealth(s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(health.Status).To(Equal("Progressing"), health.Message)
	g.Expect(health.Message).To(ContainSubstring("being deleted"))

	// Following the advice: without the finalizer the Stack goes and its
	// resources stay.
	g.Eventually(func(g Gomega) {
		cur := getStack(g, ns, "site")
		g.Expect(cur).NotTo(BeNil())
		base := cur.DeepCopy()
		cur.Finalizers = nil
		g.Expect(env.Client.Patch(ctx, cur, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))).To(Succeed())
	}, opTimeout, 250*time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getStack(g, ns, "site")).To(BeNil())
	}, opTimeout, 250*time.Millisecond).Should(Succeed())
	g.Expect(readFile(g, target)).To(Equal("from a Program"), "nothing was destroyed")
}
