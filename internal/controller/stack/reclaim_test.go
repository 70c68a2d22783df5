package stack_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	stackctl "github.com/stackyard/stackyard/internal/controller/stack"
	"github.com/stackyard/stackyard/test/gitserver"
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

// TestGovernedWorkspace: the Workspace of a Stack that a stage governs
// runs only the Updates its Stack made (change.Authorize). A destroy asked
// for by hand (as a user with create on updates would) fails before it
// starts, saying whose the Workspace is, and the Stack's resource is still
// there.
func TestGovernedWorkspace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// A governed Stack pins a commit (config/policy/stack-governance.yaml).
	s, target := newFileStack(t, "governed", webProgram)
	repo := gitserver.New(t).CreateRepo("governed")
	sha := repo.Commit("main", map[string]string{"Pulumi.yaml": webProgram(target)})
	s.Spec.GitSource = &shared.GitSource{ProjectRepo: repo.URL, Commit: sha}
	s.Spec.Config = config("governed")
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	ns := s.Namespace
	waitStack(t, ns, "governed", opTimeout, ready)
	patch := []byte(`{"metadata":{"annotations":{"` + promotionv1alpha1.AuthorizedStageAnnotation + `":"prod"}}}`)
	g.Expect(env.Client.Patch(ctx, s, client.RawPatch(types.MergePatchType, patch))).To(Succeed())

	destroy := &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-hand"},
		Spec:       autov1alpha1.UpdateSpec{WorkspaceName: stackctl.WorkspaceName(s), StackName: "dev", Type: autov1alpha1.DestroyType},
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

// TestUpdateNameTaken: an Update someone else made under the name of a
// Stack's next Update (its name can be worked out from the Stack), with a
// forged Complete status, is not taken for the Stack's own. The Stack
// stalls saying whose the Update is, deploys nothing and records nothing;
// once the Update is deleted, the Stack deploys.
func TestUpdateNameTaken(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, target := newFileStack(t, "squatted", webProgram)
	repo := gitserver.New(t).CreateRepo("squatted")
	sha := repo.Commit("main", map[string]string{"Pulumi.yaml": webProgram(target)})
	s.Spec.GitSource = &shared.GitSource{ProjectRepo: repo.URL, Commit: sha}
	s.Spec.Config = config("squatted")
	ns := s.Namespace
	first := s.DeepCopy()
	first.Generation = 1
	name := stackctl.BuildUpdate(first, sha, autov1alpha1.UpType, "").Name

	squat := &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       autov1alpha1.UpdateSpec{WorkspaceName: "elsewhere", StackName: "dev", Type: autov1alpha1.UpType},
	}
	g.Expect(env.Client.Create(ctx, squat)).To(Succeed())
	// The Update controller marks it pending (its Workspace does not
	// exist) at about the same time: the forgery is written over that.
	g.Eventually(func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(squat), squat); err != nil {
			return err
		}
		squat.Status.Message = "forged"
		squat.Status.Conditions = []metav1.Condition{{Type: autov1alpha1.UpdateConditionTypeComplete, Status: metav1.ConditionTrue,
			Reason: "Updated", Message: "forged", LastTransitionTime: metav1.Now()}}
		return env.Client.Status().Update(ctx, squat)
	}, opTimeout, 100*time.Millisecond).Should(Succeed())

	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	waitStack(t, ns, "squatted", opTimeout, func(g Gomega, st *pulumiv1.Stack) {
		c := findCondition(st, "Stalled")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(pulumiv1.StalledNameTakenReason))
		g.Expect(c.Message).To(Equal("update " + name + " exists and was not made by this Stack (it has no controller): " +
			"the Stack does not take another's update for its own; delete it to go on"))
	})
	st := getStack(g, ns, "squatted")
	g.Expect(st.Status.LastUpdate).To(BeNil(), "the forged Update was recorded: %s", describe(st))
	g.Expect(st.Status.CurrentUpdate).To(BeNil())
	g.Expect(target).NotTo(BeAnExistingFile(), "nothing may have been deployed")

	g.Expect(env.Client.Delete(ctx, squat)).To(Succeed())
	st = waitStack(t, ns, "squatted", opTimeout, ready)
	g.Expect(st.Status.LastUpdate.Name).To(Equal(name))
	g.Expect(readFile(g, target)).To(Equal("squatted"))
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
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: stackctl.WorkspaceName(s)},
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
