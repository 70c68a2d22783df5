package stack_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// TestWorkspaceReclaimDelete keeps a Workspace only while an update runs:
// once the Stack is synced its Workspace is deleted, and the next update
// (a spec change) makes a new one.
func TestWorkspaceReclaimDelete(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, target := programStack(t, "reclaimed", func(s *shared.StackSpec) { s.WorkspaceReclaimPolicy = shared.WorkspaceReclaimDelete })
	ns := s.Namespace
	waitStack(t, ns, "reclaimed", opTimeout, ready)
	g.Expect(readFile(g, target)).To(Equal("from a Program"))
	workspaceGone := func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "reclaimed"}, &autov1alpha1.Workspace{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Workspace still exists: %v", err)
	}
	g.Eventually(workspaceGone, opTimeout, 250*time.Millisecond).Should(Succeed())

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
	s.Spec.Refresh = true
	g.Expect(env.Client.Update(ctx, s)).To(Succeed())
	waitStack(t, ns, "reclaimed", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		ready(g, s)
		g.Expect(s.Status.LastUpdate.Generation).To(Equal(s.Generation))
	})
	g.Eventually(workspaceGone, opTimeout, 250*time.Millisecond).Should(Succeed())
}
