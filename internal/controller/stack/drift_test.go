package stack_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	s, target := newFileStack(t, name, webProgram)
	ns = s.Namespace
	s.Spec.Config = config("hello")
	s.Spec.DriftDetection = &shared.DriftDetection{IntervalSeconds: 1, Remediate: remediate}
	g.Expect(env.Client.Create(context.Background(), s)).To(Succeed())
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
// the check finds the drift (Drifted), an update restores the file
// (Remediated, naming that update) and the next check finds none (InSync).
// The next check follows the remediation within a second, quicker than a
// poll would reliably see; a watch sees every status the controller
// writes, so the test asserts the whole sequence, in order.
func TestDriftRemediated(t *testing.T) {
	g := NewWithT(t)
	ns, target := driftStack(t, "healing", true)
	w := watchStack(t, ns, "healing")
	g.Expect(os.WriteFile(target, []byte("edited by hand"), 0o644)).To(Succeed())

	var reasons []string
	var remediated *pulumiv1.Stack
	deadline := time.Now().Add(2 * opTimeout)
	for !slices.Equal(reasons[max(len(reasons)-2, 0):], []string{stack.DriftReasonRemediated, stack.DriftReasonInSync}) {
		s := w.next(deadline)
		g.Expect(s).NotTo(BeNil(), "out of time; the DriftDetected reasons so far: %v", reasons)
		c := findCondition(s, pulumiv1.DriftDetectedCondition)
		g.Expect(c).NotTo(BeNil(), "the DriftDetected condition went away after %v", reasons)
		if len(reasons) > 0 && reasons[len(reasons)-1] == c.Reason {
			continue
		}
		reasons = append(reasons, c.Reason)
		if c.Reason == stack.DriftReasonRemediated {
			remediated = s
		}
	}
	g.Expect(reasons).To(Equal([]string{
		stack.DriftReasonInSync, stack.DriftReasonDrifted, stack.DriftReasonRemediated, stack.DriftReasonInSync,
	}))
	g.Expect(readFile(g, target)).To(Equal("hello"))
	fix := remediated.Status.History[0]
	g.Expect(fix.Trigger).To(Equal(string(stack.TriggerDrift)))
	g.Expect(fix.State).To(Equal(shared.SucceededStackStateMessage))
	c := findCondition(remediated, pulumiv1.DriftDetectedCondition)
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Message).To(ContainSubstring(fix.Name))
	ready(g, remediated)
}

// stackWatch follows one Stack through a watch, which delivers every
// version the API server stores, starting with the current one.
type stackWatch struct {
	t *testing.T
	w watch.Interface
}

// watchStack starts watching the Stack ns/name until the test ends.
func watchStack(t *testing.T, ns, name string) *stackWatch {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &pulumiv1.StackList{},
		client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return &stackWatch{t: t, w: w}
}

// next returns the next version of the Stack, or nil when none comes
// before deadline. It fails the test when the watch ends.
func (sw *stackWatch) next(deadline time.Time) *pulumiv1.Stack {
	sw.t.Helper()
	select {
	case ev, ok := <-sw.w.ResultChan():
		s, isStack := ev.Object.(*pulumiv1.Stack)
		if !ok || !isStack {
			sw.t.Fatalf("the watch of the Stack ended (%s %T)", ev.Type, ev.Object)
		}
		return s
	case <-time.After(time.Until(deadline)):
		return nil
	}
}
