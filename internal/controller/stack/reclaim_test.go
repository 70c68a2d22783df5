package stack_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/stackrun"
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

// deployedAndRecorded deploys a Stack called name from a Program and
// returns its namespace, the Stack, its Workspace, which it records in
// status.workspace, and the file its program writes.
func deployedAndRecorded(t *testing.T, name string) (ns string, st *pulumiv1.Stack, ws autov1alpha1.Workspace, target string) {
	t.Helper()
	g := NewWithT(t)
	s, target := programStack(t, name, nil)
	st = waitStack(t, s.Namespace, name, opTimeout, ready)
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: s.Namespace, Name: name}, &ws)).To(Succeed())
	g.Expect(st.Status.Workspace).To(Equal(&shared.ObjectRecord{Name: ws.Name, UID: ws.UID}))
	return s.Namespace, st, ws, target
}

// TestUnrecordedWorkspaceRemade: a Workspace that names a Stack as its
// controller but is not the one the Stack recorded (status.workspace) is
// not taken for the Stack's, whatever admission policies are in force
// now. Here the record is gone, as after a reconcile killed between making
// the Workspace and recording it: the Stack deletes the Workspace, saying
// why, makes its own, records it and deploys.
func TestUnrecordedWorkspaceRemade(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _, ws, target := deployedAndRecorded(t, "unproven")

	g.Eventually(func() error {
		st := getStack(g, ns, "unproven")
		st.Status.Workspace = nil
		return env.Client.Status().Update(ctx, st)
	}, opTimeout, 100*time.Millisecond).Should(Succeed())
	patchStack(g, ns, "unproven", func(s *pulumiv1.Stack) { s.Spec.Refresh = true })

	st := waitStack(t, ns, "unproven", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		ready(g, s)
		g.Expect(s.Status.LastUpdate.Generation).To(Equal(s.Generation))
	})
	g.Expect(readFile(g, target)).To(Equal("from a Program"))
	var remade autov1alpha1.Workspace
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "unproven"}, &remade)).To(Succeed())
	g.Expect(remade.UID).NotTo(Equal(ws.UID), "the unrecorded Workspace was taken for the Stack's")
	g.Expect(st.Status.Workspace).To(Equal(&shared.ObjectRecord{Name: remade.Name, UID: remade.UID}))
	g.Eventually(func(g Gomega) {
		var events eventsv1.EventList
		g.Expect(env.Client.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, e := range events.Items {
			if e.Regarding.Kind == "Stack" && e.Reason == "WorkspaceUnproven" {
				notes = append(notes, e.Note)
			}
		}
		g.Expect(notes).To(ContainElement(HavePrefix("workspace unproven names this Stack as its controller, but status.workspace has no record of it (UID " +
			string(ws.UID) + ")")))
	}, opTimeout, 250*time.Millisecond).Should(Succeed())
}

// TestUpgradeFromUnrecorded: a Stack as a stackyard from before records
// left it, with an Update waiting to start: its status records neither
// the Workspace nor the Update's UID. The new operator deletes the
// Workspace it cannot prove it made and drops the waiting Update, makes
// both anew, records them and deploys; nothing waits for good.
func TestUpgradeFromUnrecorded(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, first, ws, target := deployedAndRecorded(t, "legacy")

	start := operatorStopped(t)
	patchStack(g, ns, "legacy", func(s *pulumiv1.Stack) { s.Spec.Refresh = true })
	st := getStack(g, ns, "legacy")
	pending := stackrun.BuildUpdate(st, stackrun.UpdateFor{Revision: first.Status.LastUpdate.LastSuccessfulCommit, Type: autov1alpha1.UpType, Trigger: ""})
	g.Expect(controllerutil.SetControllerReference(st, pending, env.Scheme)).To(Succeed())
	g.Expect(env.Client.Create(ctx, pending)).To(Succeed())
	st.Status.Workspace = nil
	st.Status.CurrentUpdate = &shared.CurrentStackUpdate{Generation: st.Generation, Name: pending.Name, Commit: first.Status.LastUpdate.LastSuccessfulCommit}
	g.Expect(env.Client.Status().Update(ctx, st)).To(Succeed())
	start()

	st = waitStack(t, ns, "legacy", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		ready(g, s)
		g.Expect(s.Status.LastUpdate.Generation).To(Equal(s.Generation))
	})
	g.Expect(readFile(g, target)).To(Equal("from a Program"))
	g.Expect(st.Status.LastUpdate.Name).NotTo(Equal(pending.Name), "the unproven Update was run")
	var remade autov1alpha1.Workspace
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "legacy"}, &remade)).To(Succeed())
	g.Expect(remade.UID).NotTo(Equal(ws.UID))
	g.Expect(st.Status.Workspace).To(Equal(&shared.ObjectRecord{Name: remade.Name, UID: remade.UID}))
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(pending), &autov1alpha1.Update{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the unproven Update is still there: %v", err)
}

// TestGovernedWorkspace: the Workspace of a Stack that a stage governs
// runs only the Updates its Stack made (change.Authorize). A destroy asked
// for by hand (as a user with create on updates would) fails before it
// starts, saying whose the Workspace is, and the Stack's resource is still
// there.
func TestGovernedWorkspace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, target := pinnedFileStack(t, "governed")
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	ns := s.Namespace
	waitStack(t, ns, "governed", opTimeout, ready)
	patch := []byte(`{"metadata":{"annotations":{"` + promotionv1alpha1.AuthorizedStageAnnotation + `":"prod"}}}`)
	g.Expect(env.Client.Patch(ctx, s, client.RawPatch(types.MergePatchType, patch))).To(Succeed())

	destroy := &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-hand"},
		Spec:       autov1alpha1.UpdateSpec{WorkspaceName: stackrun.WorkspaceName(s), StackName: "dev", Type: autov1alpha1.DestroyType},
	}
	g.Expect(env.Client.Create(ctx, destroy)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(destroy), destroy)).To(Succeed())
		g.Expect(destroy.Status.IsComplete()).To(BeTrue())
	}, opTimeout, 250*time.Millisecond).Should(Succeed())
	failed := apimeta.FindStatusCondition(destroy.Status.Conditions, autov1alpha1.UpdateConditionTypeFailed)
	g.Expect(failed).NotTo(BeNil())
	g.Expect(failed.Reason).To(Equal(change.RefusedForeignUpdate))
	g.Expect(destroy.Status.Message).To(ContainSubstring("workspace governed was made by Stack governed, which did not make this Update"))
	g.Expect(destroy.Status.StartTime.IsZero()).To(BeTrue(), "the operation must never have started")
	g.Expect(readFile(g, target)).To(Equal("governed"), "the resource must still be there")
}

// TestPlantedUpdateNotTaken: a Stack's Updates are named by the API
// server when the Stack makes them, so nobody can make one first under the
// name of its next one. An Update someone else made claiming the Stack as
// its controller (no admission policy here stops the claim) is not the
// Stack's: the Stack never records it, and the choke point does not run
// it, while the Stack deploys through an Update of its own, whose name
// and UID it records.
func TestPlantedUpdateNotTaken(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, target := pinnedFileStack(t, "squatted")
	ns := s.Namespace
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())

	planted := &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "squatted-planted", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: pulumiv1.GroupVersion.String(), Kind: "Stack", Name: s.Name, UID: s.UID, Controller: ptr.To(true)}}},
		Spec: autov1alpha1.UpdateSpec{WorkspaceName: stackrun.WorkspaceName(s), StackName: s.Spec.Stack, Type: autov1alpha1.DestroyType},
	}
	g.Expect(env.Client.Create(ctx, planted)).To(Succeed())

	st := waitStack(t, ns, "squatted", opTimeout, ready)
	g.Expect(readFile(g, target)).To(Equal("squatted"))
	g.Expect(st.Status.LastUpdate.Name).To(HavePrefix(stackrun.UpdateNamePrefix(s)))
	g.Expect(st.Status.LastUpdate.Name).NotTo(Equal(planted.Name), "the Stack recorded an Update it did not make")
	var own autov1alpha1.Update
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: st.Status.LastUpdate.Name}, &own)).To(Succeed())
	g.Expect(own.Status.StartTime.IsZero()).To(BeFalse())

	// The planted Update waits for a record that never comes (and is
	// refused once change.RecordGrace has passed), without running.
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(planted), planted)).To(Succeed())
		c := apimeta.FindStatusCondition(planted.Status.Conditions, autov1alpha1.UpdateConditionTypeProgressing)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring("waiting for its maker to record it: status.currentUpdate"))
	}, opTimeout, 250*time.Millisecond).Should(Succeed())
	g.Expect(planted.Status.StartTime.IsZero()).To(BeTrue(), "the planted Update must never have started")
	g.Expect(readFile(g, target)).To(Equal("squatted"), "the planted destroy ran")
}

// TestUnrecordedUpdateDropped leaves an Update as a reconcile killed
// between its create and its record would: the Stack's label, the Stack as
// controller, never started, named by no record. When the Stack starts its
// next Update and has recorded it, the orphan is deleted without having
// run, so nothing reads as the Stack's pending work.
func TestUnrecordedUpdateDropped(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, target := newFileStack(t, "orphaned", webProgram)
	s.Spec.Config = config("first")
	ns := s.Namespace
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	st := waitStack(t, ns, "orphaned", opTimeout, ready)

	orphan := stackrun.BuildUpdate(st, stackrun.UpdateFor{Revision: st.Status.LastUpdate.LastSuccessfulCommit, Type: autov1alpha1.DestroyType, Trigger: "Test"})
	g.Expect(controllerutil.SetControllerReference(st, orphan, env.Client.Scheme())).To(Succeed())
	g.Expect(env.Client.Create(ctx, orphan)).To(Succeed())

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(st), st)).To(Succeed())
	st.Spec.Config = config("second")
	g.Expect(env.Client.Update(ctx, st)).To(Succeed())
	st = waitStack(t, ns, "orphaned", opTimeout, func(g Gomega, st *pulumiv1.Stack) {
		ready(g, st)
		g.Expect(st.Status.ObservedGeneration).To(Equal(st.Generation))
	})
	g.Expect(readFile(g, target)).To(Equal("second"), "the orphaned destroy ran, or the new update did not")
	g.Expect(st.Status.LastUpdate.Name).NotTo(Equal(orphan.Name))
	g.Eventually(func(g Gomega) {
		var left autov1alpha1.Update
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(orphan), &left)
		if err == nil {
			g.Expect(left.Status.StartTime.IsZero()).To(BeTrue(), "the orphaned Update started")
		}
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the orphaned Update is still there: %v", err)
	}, opTimeout, 250*time.Millisecond).Should(Succeed())
}

// TestWorkspaceNameTaken: a Workspace someone else made under the name of
// a Stack's Workspace, with a field of their choosing (here: an
// environment variable the agent would run with), is not taken for the
// Stack's. The Stack stalls saying so and leaves the Workspace as it was;
// once it is deleted, the Stack makes its own and deploys.
func TestWorkspaceNameTaken(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, target := newFileStack(t, "taken", webProgram)
	s.Spec.Config = config("taken")
	ns := s.Namespace
	planted := &autov1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: stackrun.WorkspaceName(s)},
		Spec:       autov1alpha1.WorkspaceSpec{Env: []corev1.EnvVar{{Name: "PLANTED", Value: "by someone else"}}},
	}
	g.Expect(env.Client.Create(ctx, planted)).To(Succeed())

	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	waitStack(t, ns, "taken", opTimeout, func(g Gomega, st *pulumiv1.Stack) {
		c := findCondition(st, "Stalled")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(pulumiv1.StalledNameTakenReason))
		g.Expect(c.Message).To(HavePrefix("workspace taken exists and was not made by this Stack (it has no controller)"))
	})
	var ws autov1alpha1.Workspace
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(planted), &ws)).To(Succeed())
	g.Expect(metav1.GetControllerOf(&ws)).To(BeNil(), "the Stack took the Workspace it did not make")
	g.Expect(ws.Spec.Env).To(Equal(planted.Spec.Env), "the Stack changed the Workspace it did not make")
	g.Expect(target).NotTo(BeAnExistingFile(), "nothing may have been deployed")

	g.Expect(env.Client.Delete(ctx, planted)).To(Succeed())
	waitStack(t, ns, "taken", opTimeout, ready)
	g.Expect(readFile(g, target)).To(Equal("taken"))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(planted), &ws)).To(Succeed())
	g.Expect(metav1.IsControlledBy(&ws, getStack(g, ns, "taken"))).To(BeTrue())
	g.Expect(ws.Spec.Env).NotTo(ContainElement(HaveField("Name", "PLANTED")))
}
