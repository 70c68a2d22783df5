package stack_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// slowProgram is a Pulumi YAML project that sleeps for seconds and only
// then writes its file, so that an update stays in flight long enough to be
// interrupted and the file shows whether one ever got to the end.
func slowProgram(target string, seconds int) string {
	return fmt.Sprintf(`name: slow
runtime: yaml
resources:
  wait:
    type: stackyardtest:index:Sleep
    properties:
      seconds: %d
  page:
    type: stackyardtest:index:File
    properties:
      path: %s
      content: after the wait
    options:
      dependsOn:
        - ${wait}
`, seconds, target)
}

// TestOperatorRestartMidUpdate kills the operator while an update runs, twice
// in a row, and checks nothing gets stuck: each interrupted Update is
// completed as Failed with reason Interrupted instead of staying
// Progressing, status.currentUpdate never names an Update that does not
// exist, an interruption does not count as a failure towards the stall
// limit, every retry is a new Update, and the Stack ends Ready with the
// program deployed.
func TestOperatorRestartMidUpdate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	restart := operatorRestarter(t)

	stack, target := newFileStack(t, "slow", func(target string) string { return slowProgram(target, 20) })
	ns := stack.Namespace
	// Keeps the retry after each interruption quick.
	stack.Spec.RetryMaxBackoffDurationSeconds = 1
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())

	var interrupted []string
	for round := 1; round <= 2; round++ {
		running := waitRunningUpdate(t, ns, "slow", interrupted)
		restart()

		var upd autov1alpha1.Update
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: running}, &upd)).To(Succeed())
			g.Expect(upd.Status.IsComplete()).To(BeTrue(), "still not complete")
		}, opTimeout, 250*time.Millisecond).Should(Succeed(), func() string { return describe(getStack(g, ns, "slow")) })
		g.Expect(upd.Status.IsFailed()).To(BeTrue(), "round %d: an interrupted update is a failed one", round)
		failed := apimeta.FindStatusCondition(upd.Status.Conditions, autov1alpha1.UpdateConditionTypeFailed)
		g.Expect(failed.Reason).To(Equal(autov1alpha1.UpdateReasonInterrupted), "round %d: %s", round, describe(getStack(g, ns, "slow")))
		g.Expect(apimeta.IsStatusConditionTrue(upd.Status.Conditions, autov1alpha1.UpdateConditionTypeProgressing)).To(BeFalse())
		interrupted = append(interrupted, running)

		// The Stack records the interruption without counting it.
		waitStack(t, ns, "slow", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
			currentUpdateExists(g, s)
			g.Expect(s.Status.History).To(ContainElement(And(
				HaveField("Name", running),
				HaveField("State", shared.FailedStackStateMessage),
				HaveField("Reason", autov1alpha1.UpdateReasonInterrupted),
			)), "the interruption is not recorded")
			g.Expect(s.Status.LastUpdate.Failures).To(BeZero(), "an interruption is not a failure of the program")
		})
		_, err := os.Stat(target)
		g.Expect(os.IsNotExist(err)).To(BeTrue(), "round %d: the interrupted update must not have reached the file", round)
	}

	s := waitStack(t, ns, "slow", 2*opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		currentUpdateExists(g, s)
		ready(g, s)
	})
	g.Expect(readFile(g, target)).To(Equal("after the wait"))
	lu := s.Status.LastUpdate
	g.Expect(lu.State).To(Equal(shared.SucceededStackStateMessage))
	g.Expect(lu.Failures).To(BeZero())
	g.Expect(interrupted).NotTo(ContainElement(lu.Name), "the retry must be a new Update")
	g.Expect(s.Status.CurrentUpdate).To(BeNil())
	// Exactly the two restarts interrupted a run: an Update created right
	// after a restart waits for the new operator's agent instead of dialling
	// the stopped one's, which the Workspace's status still names.
	g.Expect(s.Status.History).To(HaveLen(3), describe(s))
	g.Expect(s.Status.History[0].Reason).To(BeEmpty())
	for _, h := range s.Status.History[1:] {
		g.Expect(h.Reason).To(Equal(autov1alpha1.UpdateReasonInterrupted), "%s: %s", h.Name, h.Message)
		g.Expect(h.State).To(Equal(shared.FailedStackStateMessage))
	}
}

// operatorRestarter returns a function that stops the shared operator and
// starts a new one. Whatever happens in the test, an operator runs again
// when it ends, for the tests after it.
func operatorRestarter(t *testing.T) func() {
	running := true
	t.Cleanup(func() {
		if !running {
			if err := startOperator(); err != nil {
				t.Errorf("starting the operator again: %v", err)
			}
		}
	})
	return func() {
		t.Helper()
		stopOperator()
		running = false
		if err := startOperator(); err != nil {
			t.Fatalf("starting the operator again: %v", err)
		}
		running = true
	}
}

// waitRunningUpdate waits until the Stack's current Update is one not in
// skip and its operation runs (Progressing=True, reason InProgress), and
// returns its name.
func waitRunningUpdate(t *testing.T, ns, name string, skip []string) string {
	t.Helper()
	var running string
	waitStack(t, ns, name, opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		currentUpdateExists(g, s)
		cur := s.Status.CurrentUpdate
		g.Expect(cur).NotTo(BeNil(), "no update started")
		g.Expect(slices.Contains(skip, cur.Name)).To(BeFalse(), "still the interrupted update")
		var upd autov1alpha1.Update
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: cur.Name}, &upd)).To(Succeed())
		p := apimeta.FindStatusCondition(upd.Status.Conditions, autov1alpha1.UpdateConditionTypeProgressing)
		g.Expect(p).NotTo(BeNil())
		g.Expect(p.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(p.Reason).To(Equal(autov1alpha1.UpdateReasonInProgress))
		running = cur.Name
	})
	return running
}

// currentUpdateExists fails when status.currentUpdate names an Update that
// does not exist. The Stack controller creates the Update before recording
// it, so a Stack read first must never point at nothing.
func currentUpdateExists(g Gomega, s *pulumiv1.Stack) {
	cur := s.Status.CurrentUpdate
	if cur == nil {
		return
	}
	var upd autov1alpha1.Update
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: s.Namespace, Name: cur.Name}, &upd)
	// StopTrying: this is a broken invariant, not something to wait out.
	if err != nil {
		StopTrying(fmt.Sprintf("status.currentUpdate names %s, which cannot be read: %v", cur.Name, err)).Now()
	}
}
