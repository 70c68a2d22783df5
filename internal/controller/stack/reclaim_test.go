package stack_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
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
// runs only the Updates its Stack made. A destroy asked for by hand (as a
// user with create on updates would) fails before it starts, naming the
// stage, and the Stack's resource is still there.
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
	g.Expect(destroy.Status.Message).To(ContainSubstring("which stage prod governs"))
	g.Expect(destroy.Status.StartTime.IsZero()).To(BeTrue(), "the operation must never have started")
	g.Expect(readFile(g, target)).To(Equal("governed"), "the resource must still be there")
}
