package stack_test

import (
	"context"
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
)

// TestResyncOnCommitMatchWithUpdateTTL runs a Stack with
// continueResyncOnCommitMatch: it is updated again every
// resyncFrequencySeconds although its branch does not move. Its
// updateTemplate sets a short ttlAfterCompleted, so each finished Update is
// deleted soon after, while the Stack keeps its status (lastUpdate,
// history) and is not updated again because an Update went.
func TestResyncOnCommitMatchWithUpdateTTL(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, target := newFileStack(t, "resync", func(target string) string { return fileProgram("resync", target, "synced", 0) })
	ns := s.Namespace
	s.Spec.ResyncFrequencySeconds = 2
	s.Spec.ContinueResyncOnCommitMatch = true
	s.Spec.UpdateTemplate = &autov1alpha1.UpdateTemplate{
		Spec: &autov1alpha1.UpdateSpec{TtlAfterCompleted: &metav1.Duration{Duration: time.Second}},
	}
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	// Stop the resyncs when done: the namespace outlives the test.
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), s) })

	s = waitStack(t, ns, "resync", 2*opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		ready(g, s)
		g.Expect(len(s.Status.History)).To(BeNumerically(">=", 3))
	})
	h := s.Status.History
	g.Expect(h[len(h)-1].Trigger).To(Equal(string(stack.TriggerFirstUpdate)))
	for i, r := range h[:len(h)-1] {
		g.Expect(r.Trigger).To(Equal(string(stack.TriggerResync)), "%s", r.Name)
		g.Expect(r.Commit).To(Equal(h[len(h)-1].Commit), "the branch did not move")
		g.Expect(r.State).To(Equal(shared.SucceededStackStateMessage))
		g.Expect(r.StartTime.Sub(h[i+1].EndTime.Time)).To(BeNumerically(">=", time.Second), "resyncs are spaced by the interval")
	}
	g.Expect(readFile(g, target)).To(Equal("synced"))

	// The first Update is gone (ttlAfterCompleted); what the Stack recorded
	// of it stays.
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: h[len(h)-1].Name}, &autov1alpha1.Update{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the finished Update was not deleted: %v", err)
	}, opTimeout, 250*time.Millisecond).Should(Succeed())
	g.Expect(getStack(g, ns, "resync").Status.History).To(ContainElement(HaveField("Name", h[len(h)-1].Name)))
}
