package stack_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/controller/stack"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/test/gitserver"
)

// pinnedFileStack is newFileStack's Stack with its program in a git
// repository of its own, at a pinned commit, as a Stack that a stage
// governs must be (config/policy/stack-governance.yaml); its config
// message is its name.
func pinnedFileStack(t *testing.T, name string) (*pulumiv1.Stack, string) {
	t.Helper()
	s, target := newFileStack(t, name, webProgram)
	repo := gitserver.New(t).CreateRepo(name)
	sha := repo.Commit("main", map[string]string{"Pulumi.yaml": webProgram(target)})
	s.Spec.GitSource = &shared.GitSource{ProjectRepo: repo.URL, Commit: sha}
	s.Spec.Config = config(name)
	return s, target
}

// TestHeldChange: a change to the config of a Stack that a stage governs
// is held. The Stack says so (ChangePending, status.heldSpec, Reconciling
// with reason ChangeHeld), runs nothing with it, and its resource keeps
// the value it deployed; reverting the spec withdraws the change, and the
// Stack is Ready again with the spec it was created with.
func TestHeldChange(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, target := pinnedFileStack(t, "held")
	s.Spec.Config = config("approved")
	s.Annotations = map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: "prod"}
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	ns := s.Namespace
	created := waitStack(t, ns, "held", opTimeout, ready)
	g.Expect(readFile(g, target)).To(Equal("approved"))
	digest, err := change.SpecDigest(created)
	g.Expect(err).NotTo(HaveOccurred())
	approved := created.Status.ApprovedSpec
	g.Expect(approved).NotTo(BeNil())
	g.Expect(approved.Digest).To(Equal(digest))
	g.Expect(approved.Generation).To(BeEquivalentTo(1))
	g.Expect(approved.By).To(Equal(shared.ApprovedCreated))
	g.Expect(approved.Snapshot).NotTo(BeNil(), "a governed Stack keeps the spec it approved")
	deployed := created.Status.LastUpdate.Name

	// The edit, as anyone allowed to update the Stack may make it.
	edit := func(message string) {
		t.Helper()
		cur := getStack(g, ns, "held")
		cur.Spec.Config = config(message)
		g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
	}
	edit("unreviewed")
	held := waitStack(t, ns, "held", opTimeout, func(g Gomega, st *pulumiv1.Stack) {
		g.Expect(st.Status.HeldSpec).NotTo(BeNil())
		g.Expect(st.Status.HeldSpec.Generation).To(Equal(st.Generation))
		g.Expect(st.Status.ObservedGeneration).To(Equal(st.Generation), "a held change is decided for its generation")
		c := apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ChangePendingCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(pulumiv1.ChangeHeldReason))
		r := apimeta.FindStatusCondition(st.Status.Conditions, sreconcile.ReconcilingCondition)
		g.Expect(r).NotTo(BeNil())
		g.Expect(r.Reason).To(Equal(pulumiv1.ChangeHeldReason))
	})
	heldDigest, err := change.SpecDigest(held)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(held.Status.HeldSpec.Digest).To(Equal(heldDigest))
	g.Expect(held.Status.ApprovedSpec.Digest).To(Equal(digest), "the held change was recorded as approved")
	// Approvers see what changed against the approved spec.
	g.Expect(held.Status.HeldSpec.Changes).To(Equal([]shared.SpecChange{{Path: `config["web:message"]`, Op: shared.SpecChangeChanged,
		Old: `"approved"`, New: `"unreviewed"`}}))
	g.Expect(apimeta.FindStatusCondition(held.Status.Conditions, pulumiv1.ChangePendingCondition).Message).To(
		ContainSubstring("spec: Stack held is governed by stage prod"))
	// Nothing runs with it: no Update, the resource as deployed.
	g.Consistently(func(g Gomega) {
		st := getStack(g, ns, "held")
		g.Expect(st.Status.CurrentUpdate).To(BeNil())
		g.Expect(st.Status.LastUpdate.Name).To(Equal(deployed))
	}, 3*time.Second, 250*time.Millisecond).Should(Succeed())
	g.Expect(readFile(g, target)).To(Equal("approved"))

	// A second edit replaces the first: one change is held, the newest.
	edit("unreviewed again")
	again := waitStack(t, ns, "held", opTimeout, func(g Gomega, st *pulumiv1.Stack) {
		g.Expect(st.Status.HeldSpec).NotTo(BeNil())
		g.Expect(st.Status.HeldSpec.Generation).To(Equal(st.Generation))
	})
	g.Expect(again.Status.HeldSpec.Digest).NotTo(Equal(heldDigest))

	// Reverting the spec withdraws the change.
	edit("approved")
	waitStack(t, ns, "held", opTimeout, func(g Gomega, st *pulumiv1.Stack) {
		ready(g, st)
		g.Expect(st.Status.HeldSpec).To(BeNil())
		g.Expect(apimeta.FindStatusCondition(st.Status.Conditions, pulumiv1.ChangePendingCondition)).To(BeNil())
		g.Expect(st.Status.ApprovedSpec.Digest).To(Equal(digest))
	})
	g.Expect(readFile(g, target)).To(Equal("approved"))
	g.Eventually(func(g Gomega) {
		var events eventsv1.EventList
		g.Expect(env.Client.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		reasons := map[string]int{}
		for _, e := range events.Items {
			if e.Regarding.Kind == "Stack" && e.Regarding.Name == "held" {
				reasons[e.Reason]++
			}
		}
		g.Expect(reasons).To(HaveKeyWithValue(stack.EventChangeHeld, 2))
		g.Expect(reasons).To(HaveKeyWithValue(stack.EventChangeWithdrawn, 1))
	}, opTimeout, 250*time.Millisecond).Should(Succeed())
}
