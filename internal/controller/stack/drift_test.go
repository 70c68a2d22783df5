package stack_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/controller/stack"
)

// driftStack deploys the test program with drift detection every second
// (the operator's floor is lowered to one second in these tests) and waits
// for the first check to find no drift.
func driftStack(t *testing.T, name string, remediate bool) (ns, target string) {
	t.Helper()
	g := NewWithT(t)
	ns = newNamespace(t)
	dir := t.TempDir()
	target = filepath.Join(dir, "page.txt")
	g.Expect(env.Client.Create(context.Background(), &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: shared.StackSpec{
			Stack:          "dev",
			Backend:        backendURL(t, dir),
			Config:         config("hello"),
			GitSource:      programSource(t, "web", program(target, false)),
			DriftDetection: &shared.DriftDetection{IntervalSeconds: 1, Remediate: remediate},
		},
	})).To(Succeed())
	waitStack(t, ns, name, opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		ready(g, s)
		c := findCondition(s, pulumiv1.DriftDetectedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(stack.DriftReasonInSync))
	})
	return ns, target
}

// TestDriftDetectedNotRemediated edits the deployed file by hand: the next
// check reports drift (condition, status, event) and changes nothing, and
// the Stack stays Ready meanwhile (a check is not a deployment).
func TestDriftDetectedNotRemediated(t *testing.T) {
	g := NewWithT(t)
	ns, target := driftStack(t, "drifting", false)
	g.Expect(os.WriteFile(target, []byte("edited by hand"), 0o644)).To(Succeed())
	s := waitStack(t, ns, "drifting", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		g.Expect(s.Status.LastDriftCheck).NotTo(BeNil())
		g.Expect(s.Status.LastDriftCheck.Drifted).To(BeTrue())
	})
	c := findCondition(s, pulumiv1.DriftDetectedCondition)
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(c.Message).To(ContainSubstring("update 1"))
	g.Expect(s.Status.LastDriftCheck.Changes).To(HaveKeyWithValue("update", BeEquivalentTo(1)))
	g.Expect(s.Status.History[0].Trigger).To(Equal("DriftCheck"))
	// Nothing is remediated: the hand edit stays, no update ran since.
	g.Consistently(func(g Gomega) {
		g.Expect(readFile(g, target)).To(Equal("edited by hand"))
		ready(g, getStack(g, ns, "drifting"))
	}, 3*time.Second, 500*time.Millisecond).Should(Succeed())
	g.Expect(getStack(g, ns, "drifting").Status.LastUpdate.Name).To(Equal(s.Status.LastUpdate.Name))
}

// TestDriftRemediated edits the deployed file by hand with remediation on:
// the check finds the drift and an update restores the file.
func TestDriftRemediated(t *testing.T) {
	g := NewWithT(t)
	ns, target := driftStack(t, "healing", true)
	g.Expect(os.WriteFile(target, []byte("edited by hand"), 0o644)).To(Succeed())
	s := waitStack(t, ns, "healing", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		ready(g, s)
		g.Expect(s.Status.History[0].Trigger).To(Equal(string(stack.TriggerDrift)))
	})
	g.Expect(readFile(g, target)).To(Equal("hello"))
	c := findCondition(s, pulumiv1.DriftDetectedCondition)
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(BeElementOf(stack.DriftReasonRemediated, stack.DriftReasonInSync))
}
