package stack_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/controller/stack"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// lockHolder is a Stack whose update holds the lock of a Pulumi stack for
// as long as the test wants: its program sleeps for ten minutes, far
// longer than any test waits, and the test ends the update (release) once
// it has seen what happens meanwhile. Nothing depends on how long a step
// takes, only on the order of events.
type lockHolder struct {
	stack *pulumiv1.Stack
	// update is the holder's running Update.
	update string
	// dir holds the backend the holder and its contender share.
	dir string
}

// holdLock creates the Stack "holder" in a new namespace and returns once
// its update runs and the CLI has taken the stack's lock (a lock file in
// the file:// backend). The lock is released when the test ends, if the
// test did not release it.
func holdLock(t *testing.T) *lockHolder {
	t.Helper()
	g := NewWithT(t)
	s, target := newFileStack(t, "holder", func(target string) string { return slowProgram(target, 600) })
	g.Expect(env.Client.Create(context.Background(), s)).To(Succeed())
	h := &lockHolder{stack: s, dir: filepath.Dir(target)}
	h.update = waitRunningUpdate(t, s.Namespace, s.Name, nil)
	g.Eventually(func() []string { return stateLocks(t, h.dir) }, opTimeout, 100*time.Millisecond).ShouldNot(BeEmpty(),
		"the holder's update never took the stack's lock")
	t.Cleanup(func() { h.release(t) })
	return h
}

// contend creates, in the holder's namespace, the Stack "contender", which
// updates the same Pulumi stack (same backend, project and stack name)
// with a program that writes target at once, and returns it and target.
func (h *lockHolder) contend(t *testing.T, retry bool) (*pulumiv1.Stack, string) {
	t.Helper()
	target := filepath.Join(h.dir, "contender.txt")
	s := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "contender", Namespace: h.stack.Namespace},
		Spec: shared.StackSpec{
			Stack:                 h.stack.Spec.Stack,
			Backend:               h.stack.Spec.Backend,
			GitSource:             programSource(t, "contender", fileProgram("slow", target, "from the contender", 0)),
			RetryOnUpdateConflict: retry,
			// Retries a second apart, so that a test sees several.
			RetryMaxBackoffDurationSeconds: 1,
		},
	}
	NewWithT(t).Expect(env.Client.Create(context.Background(), s)).To(Succeed())
	return s, target
}

// stillRunning fails unless the holder's update is still running, i.e.
// still holds the lock.
func (h *lockHolder) stillRunning(g Gomega) {
	var upd autov1alpha1.Update
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: h.stack.Namespace, Name: h.update}, &upd)).To(Succeed())
	g.Expect(upd.Status.IsComplete()).To(BeFalse(), "the holder's update ended: the lock was free")
}

// release deletes the holder Stack, so that it starts nothing more, then
// its running Update, which cancels the operation, and waits until both
// are gone: the CLI has then stopped and no longer holds the lock (a lock
// it failed to remove names a dead process, which the next operation
// clears).
func (h *lockHolder) release(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	upd := &autov1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: h.stack.Namespace, Name: h.update}}
	for _, obj := range []client.Object{h.stack, upd} {
		g.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, obj))).To(Succeed())
	}
	for _, obj := range []client.Object{h.stack, upd} {
		g.Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj))
		}, opTimeout, 250*time.Millisecond).Should(BeTrue(), "%s is still there", obj.GetName())
	}
}

// isConflict matches a history record of an update that could not run
// because another update held the stack.
func isConflict() OmegaMatcher {
	return And(HaveField("State", shared.FailedStackStateMessage), HaveField("Reason", autov1alpha1.UpdateReasonConflict))
}

// TestUpdateConflictStalls runs a Stack's update while another Stack's
// update of the same Pulumi stack holds its lock, with
// retryOnUpdateConflict off: the update fails with reason UpdateConflict
// and the Stack stalls with reason UpdateConflict, naming the option,
// without retrying by itself. Once the lock is free, a reconcile request
// (a person acting on the stall) runs it.
func TestUpdateConflictStalls(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	holder := holdLock(t)
	s, target := holder.contend(t, false)
	ns := s.Namespace
	s = waitStack(t, ns, s.Name, opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		g.Expect(sreconcile.IsStalled(s.Status.Conditions)).To(BeTrue(), "not Stalled")
	})
	holder.stillRunning(g)
	stalled := findCondition(s, sreconcile.StalledCondition)
	g.Expect(stalled.Reason).To(Equal(pulumiv1.StalledConflictReason))
	g.Expect(stalled.Message).To(ContainSubstring("spec.retryOnUpdateConflict"))
	g.Expect(sreconcile.IsReady(s.Status.Conditions)).To(BeFalse())
	g.Expect(findCondition(s, sreconcile.ReconcilingCondition)).To(BeNil())
	g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation), "a stall is a handled generation")
	g.Expect(s.Status.History).To(HaveExactElements(isConflict()))
	g.Expect(s.Status.LastUpdate.State).To(Equal(shared.FailedStackStateMessage))
	_, err := os.Stat(target)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the conflicting update changed nothing")

	holder.release(t)
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
	s.Annotations = map[string]string{shared.ReconcileRequestAnnotation: "lock-free"}
	g.Expect(env.Client.Update(ctx, s)).To(Succeed())
	s = waitStack(t, ns, s.Name, opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		ready(g, s)
		g.Expect(s.Status.LastUpdate.ReconcileRequest).To(Equal("lock-free"))
	})
	g.Expect(readFile(g, target)).To(Equal("from the contender"))
	// Two updates in all: the stalled Stack never retried on its own.
	g.Expect(s.Status.History).To(HaveExactElements(
		HaveField("Trigger", string(stack.TriggerReconcileRequest)),
		isConflict(),
	))
}

// TestUpdateConflictRetried is TestUpdateConflictStalls with
// retryOnUpdateConflict on: the update fails with reason UpdateConflict,
// but the Stack does not stall; it says it retries, and once the lock is
// free the retry deploys the program without anyone acting.
func TestUpdateConflictRetried(t *testing.T) {
	g := NewWithT(t)
	holder := holdLock(t)
	s, target := holder.contend(t, true)
	// More conflicts than the failures in a row that stall a Stack: with
	// retryOnUpdateConflict a conflict is not counted as one.
	// Between two retries the Stack either waits (reason
	// RetryingAfterFailure) or runs the next attempt (StackProcessing);
	// the wait is observed, not assumed, so that the test does not depend
	// on which of the two a single read lands on.
	s = waitStack(t, s.Namespace, s.Name, 2*opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		g.Expect(len(s.Status.History)).To(BeNumerically(">", stack.MaxConsecutiveFailures))
		g.Expect(findCondition(s, sreconcile.ReconcilingCondition)).To(HaveField("Reason", pulumiv1.ReconcilingRetryReason))
	})
	holder.stillRunning(g)
	g.Expect(s.Status.History).To(HaveEach(isConflict()))
	g.Expect(sreconcile.IsStalled(s.Status.Conditions)).To(BeFalse(), "a conflict with retryOnUpdateConflict must not stall")
	g.Expect(sreconcile.IsReady(s.Status.Conditions)).To(BeFalse())

	holder.release(t)
	s = waitStack(t, s.Namespace, s.Name, 2*opTimeout, ready)
	g.Expect(readFile(g, target)).To(Equal("from the contender"))
	g.Expect(s.Status.LastUpdate.State).To(Equal(shared.SucceededStackStateMessage))
	h := s.Status.History
	g.Expect(h[0].Trigger).To(Equal(string(stack.TriggerRetry)))
	g.Expect(h[1:]).NotTo(BeEmpty())
	g.Expect(h[1:]).To(HaveEach(isConflict()), "every update before the successful one conflicted")
}
