package stack_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/test/argocd"
)

// TestWorkspaceStallStallsTheStack: a Workspace that cannot set its stack up
// (useLocalStackOnly on a stack that does not exist) stalls the Stack with
// reason WorkspaceFailed (Argo CD: Degraded) instead of leaving it
// "waiting for workspace readiness" forever; fixing the spec recovers it.
func TestWorkspaceStallStallsTheStack(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, target := programStack(t, "local-only", func(s *shared.StackSpec) {
		s.Stack, s.UseLocalStackOnly = "does-not-exist", true
	})
	ns := s.Namespace
	s = waitStack(t, ns, "local-only", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		g.Expect(sreconcile.IsStalled(s.Status.Conditions)).To(BeTrue())
	})
	c := findCondition(s, "Stalled")
	g.Expect(c.Reason).To(Equal(pulumiv1.StalledWorkspaceFailedReason))
	g.Expect(c.Message).To(ContainSubstring("does-not-exist"))
	health, err := argocd.StackHealth(s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(health.Status).To(Equal("Degraded"))

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
	s.Spec.UseLocalStackOnly = false
	g.Expect(env.Client.Update(ctx, s)).To(Succeed())
	waitStack(t, ns, "local-only", opTimeout, ready)
	g.Expect(readFile(g, target)).To(Equal("from a Program"))
}

// TestMissingLanguageHostStallsTheStack: a program whose runtime has no
// language host on the operator's tool path (nodejs, here, where only the
// YAML host is built) stalls the Stack with reason WorkspaceFailed and a
// message that names the host and the two ways out, instead of the CLI's
// own words or a wait that never ends.
func TestMissingLanguageHostStallsTheStack(t *testing.T) {
	g := NewWithT(t)
	s, _ := newFileStack(t, "nodejs", func(string) string { return "name: web\nruntime: nodejs\n" })
	g.Expect(env.Client.Create(context.Background(), s)).To(Succeed())
	s = waitStack(t, s.Namespace, "nodejs", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		g.Expect(sreconcile.IsStalled(s.Status.Conditions)).To(BeTrue())
	})
	c := findCondition(s, "Stalled")
	g.Expect(c.Reason).To(Equal(pulumiv1.StalledWorkspaceFailedReason))
	g.Expect(c.Message).To(SatisfyAll(ContainSubstring("pulumi-language-nodejs"), ContainSubstring("--tool-dirs"),
		ContainSubstring("kubernetes runtime")))
	t.Logf("Stalled: %s", c.Message)
	health, err := argocd.StackHealth(s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(health.Status).To(Equal("Degraded"))
}
