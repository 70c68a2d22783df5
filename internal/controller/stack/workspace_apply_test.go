package stack_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/controller/stack"
	"github.com/stackyard/stackyard/internal/controller/workspace"
	"github.com/stackyard/stackyard/internal/stackrun"
	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/testenv"
)

// patchCounter is the test's API client, counting the patches it sends.
type patchCounter struct {
	client.Client
	patches atomic.Int64
}

// Patch counts the patch and sends it.
func (c *patchCounter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.patches.Add(1)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

// TestWorkspaceApplySkippedWhenUnchanged runs the Workspace step of a
// reconcile, with its own Reconciler, on the real API server: once nobody
// else writes the Workspace, applying the same content sends no request;
// a write by someone else (a label changed under another field manager)
// makes the next reconcile apply again and put the label back.
func TestWorkspaceApplySkippedWhenUnchanged(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	dir := testenv.LiveDir(t)
	repo := gitserver.New(t).CreateRepo("quiet")
	commit := repo.Commit("main", map[string]string{"Pulumi.yaml": fileProgram("quiet", filepath.Join(dir, "page.txt"), "one", 0)})
	// The Stack exists only here (the operator has none to reconcile), so
	// only this test applies its Workspace; the operator's Workspace
	// controller sets the Workspace up and then leaves it idle.
	s := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "quiet", Namespace: ns, UID: types.UID(uuid.NewUUID())},
		Spec: shared.StackSpec{
			Stack:     "dev",
			Backend:   backendURL(t, dir),
			GitSource: &shared.GitSource{ProjectRepo: repo.URL, Branch: "main"},
		},
	}
	s.SetGroupVersionKind(pulumiv1.GroupVersion.WithKind("Stack"))
	src := stackrun.Source{Git: &autov1alpha1.GitSource{URL: repo.URL, Ref: commit}, Revision: commit}
	c := &patchCounter{Client: env.Client}
	r := &stack.Reconciler{Client: c, APIReader: env.Client, Scheme: env.Scheme}

	g.Expect(r.ApplyWorkspace(ctx, s, src)).To(Succeed())
	g.Expect(c.patches.Load()).To(Equal(int64(1)), "the first apply")
	key := client.ObjectKey{Namespace: ns, Name: stackrun.WorkspaceName(s)}
	resourceVersion := func() string {
		var ws autov1alpha1.Workspace
		g.Expect(env.Client.Get(ctx, key, &ws)).To(Succeed())
		return ws.ResourceVersion
	}
	// The Workspace controller writes the status a few times while it sets
	// the Workspace up and then idles its agent, and each write makes one
	// more apply due; once the agent is idle it is quiet, and applies stop.
	g.Eventually(func(g Gomega) {
		var ws autov1alpha1.Workspace
		g.Expect(env.Client.Get(ctx, key, &ws)).To(Succeed())
		active := apimeta.FindStatusCondition(ws.Status.Conditions, autov1alpha1.WorkspaceActive)
		g.Expect(active).NotTo(BeNil())
		g.Expect(active.Reason).To(Equal(workspace.ReasonIdle))
	}, opTimeout, 250*time.Millisecond).Should(Succeed(), "the Workspace's agent was never idled")
	g.Eventually(func() bool {
		before, sent := resourceVersion(), c.patches.Load()
		g.Expect(r.ApplyWorkspace(ctx, s, src)).To(Succeed())
		return c.patches.Load() == sent && resourceVersion() == before
	}, opTimeout, 500*time.Millisecond).Should(BeTrue(), "an apply that changes nothing is still sent")
	for range 3 {
		sent := c.patches.Load()
		g.Expect(r.ApplyWorkspace(ctx, s, src)).To(Succeed())
		g.Expect(c.patches.Load()).To(Equal(sent), "an apply that changes nothing was sent")
	}

	intruder := &autov1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name}}
	g.Expect(env.Client.Patch(ctx, intruder,
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+stackrun.StackNameLabel+`":"someone-else"}}}`)),
		client.FieldOwner("intruder"))).To(Succeed())
	sent := c.patches.Load()
	g.Expect(r.ApplyWorkspace(ctx, s, src)).To(Succeed())
	g.Expect(c.patches.Load()).To(Equal(sent+1), "a Workspace written by someone else was not applied again")
	var ws autov1alpha1.Workspace
	g.Expect(env.Client.Get(ctx, key, &ws)).To(Succeed())
	g.Expect(ws.Labels).To(HaveKeyWithValue(stackrun.StackNameLabel, "quiet"))
}
