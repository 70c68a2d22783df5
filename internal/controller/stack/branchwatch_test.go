package stack_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/controller/stack"
	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/testenv"
)

// TestBranchMoveWakesStacks pushes to a branch two Ready Stacks track,
// without a reconcile request: both deploy the new commit (trigger
// NewRevision). A Ready Stack on a watched branch looks again on its own
// only after stack.WatchedResync (10 minutes, longer than this test may
// wait), and the push waits until their agents have idled, so it is the
// branch watch that wakes them.
func TestBranchMoveWakesStacks(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	dir := testenv.LiveDir(t)
	repo := gitserver.New(t).CreateRepo("watched")
	first := repo.Commit("main", map[string]string{"Pulumi.yaml": pathProgram})
	for _, name := range []string{"one", "two"} {
		s := &pulumiv1.Stack{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: shared.StackSpec{
				Stack:   "dev",
				Backend: backendURL(t, filepath.Join(dir, name)),
				Config: map[string]apiextensionsv1.JSON{
					"private:path": {Raw: []byte(strconv.Quote(filepath.Join(dir, name+".txt")))},
				},
				GitSource:              &shared.GitSource{ProjectRepo: repo.URL, Branch: "main"},
				ResyncFrequencySeconds: 1,
			},
		}
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	}
	// They poll every second: stop them when done, the namespace stays.
	t.Cleanup(func() {
		_ = env.Client.DeleteAllOf(context.Background(), &pulumiv1.Stack{}, client.InNamespace(ns))
	})
	for _, name := range []string{"one", "two"} {
		s := waitStack(t, ns, name, opTimeout, ready)
		g.Expect(s.Status.LastUpdate.LastSuccessfulCommit).To(Equal(first), name)
	}
	// Once their agents are idle nothing else happens to them: no change
	// of a Workspace or Update wakes them after the push.
	for _, name := range []string{"one", "two"} {
		g.Eventually(func(g Gomega) {
			var ws autov1alpha1.Workspace
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ws)).To(Succeed())
			active := apimeta.FindStatusCondition(ws.Status.Conditions, autov1alpha1.WorkspaceActive)
			g.Expect(active).NotTo(BeNil())
			g.Expect(active.Status).To(Equal(metav1.ConditionFalse), "the agent of %s still runs", name)
		}, opTimeout, 250*time.Millisecond).Should(Succeed())
	}

	second := repo.Commit("main", map[string]string{"Pulumi.yaml": pathProgram, "README": "v2"})
	for _, name := range []string{"one", "two"} {
		s := waitStack(t, ns, name, opTimeout, func(g Gomega, s *pulumiv1.Stack) {
			ready(g, s)
			g.Expect(s.Status.LastUpdate.LastSuccessfulCommit).To(Equal(second))
		})
		g.Expect(s.Status.History[0].Trigger).To(Equal(string(stack.TriggerRevision)), name)
	}
}
