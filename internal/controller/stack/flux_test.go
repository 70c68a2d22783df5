package stack_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/controller/stack"
	"github.com/stackyard/stackyard/internal/controller/workspace"
	"github.com/stackyard/stackyard/test/fluxsc"
	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/testenv"
)

// fluxTimeout bounds how long source-controller may take to publish an
// artifact for a commit on loopback.
const fluxTimeout = time.Minute

// TestFluxSourceStack deploys a program published by a Flux GitRepository
// that Flux's own source-controller (test/fluxsc) reconciles: it clones the
// repository from the git server on loopback, packs and serves the
// artifact and writes the source's status. The Stack deploys that
// artifact's program directory and records the artifact's revision as the
// attempted and successful commit. When a new commit is pushed and Flux is
// asked to reconcile, it publishes a new artifact and the Stack deploys
// that one, woken by the source's watch: the Stack's own next look is an
// hour away, and the commit is pushed only once its Workspace has gone
// idle, the last change of the objects it owns that would wake it.
func TestFluxSourceStack(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	dir := testenv.LiveDir(t)
	target := filepath.Join(dir, "page.txt")
	sc := fluxsc.Start(t, env)

	repo := gitserver.New(t).CreateRepo("infra")
	rev1 := "main@sha1:" + repo.Commit("main", map[string]string{
		"deploy/Pulumi.yaml": fileProgram("flux", target, "first artifact", 0),
		"README.md":          "outside the program's directory",
	})
	src := sc.Own(fluxsc.NewSource("GitRepository", ns, "infra", map[string]any{
		"url": repo.URL, "interval": "1h", "ref": map[string]any{"branch": "main"},
	}))
	g.Expect(env.Client.Create(ctx, src)).To(Succeed())

	s := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "flux", Namespace: ns},
		Spec: shared.StackSpec{
			Stack:   "dev",
			Backend: backendURL(t, dir),
			FluxSource: &shared.FluxSource{
				SourceRef: shared.FluxSourceReference{APIVersion: fluxsc.APIVersion, Kind: "GitRepository", Name: "infra"},
				Dir:       "deploy",
			},
			ResyncFrequencySeconds: 3600,
		},
	}
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	published := fluxsc.Wait(t, env.Client, src, fluxTimeout, fluxsc.Revision(rev1))
	s = waitStack(t, ns, "flux", opTimeout, ready)
	g.Expect(readFile(g, target)).To(Equal("first artifact"))
	g.Expect(s.Status.LastUpdate.LastAttemptedCommit).To(Equal(rev1))
	g.Expect(s.Status.LastUpdate.LastSuccessfulCommit).To(Equal(rev1))
	// The Workspace downloads the artifact source-controller serves,
	// pinned to its digest.
	ws := getWorkspace(g, ns, "flux")
	g.Expect(ws.Spec.Flux).NotTo(BeNil())
	art := fluxsc.Artifact(published)
	g.Expect(ws.Spec.Flux.URL).To(Equal(art.URL))
	g.Expect(ws.Spec.Flux.Digest).To(Equal(art.Digest))
	g.Expect(art.URL).To(HavePrefix("http://"+sc.StorageAddr+"/gitrepository/"+ns+"/infra/"), "served by source-controller")
	g.Eventually(func(g Gomega) {
		active := apimeta.FindStatusCondition(getWorkspace(g, ns, "flux").Status.Conditions, autov1alpha1.WorkspaceActive)
		g.Expect(active).NotTo(BeNil())
		g.Expect(active.Reason).To(Equal(workspace.ReasonIdle))
	}, opTimeout, 250*time.Millisecond).Should(Succeed(), "the Workspace never went idle")

	// A new commit, and Flux asked to look now rather than in an hour.
	rev2 := "main@sha1:" + repo.Commit("main", map[string]string{
		"deploy/Pulumi.yaml": fileProgram("flux", target, "second artifact", 0),
	})
	_, err := fluxsc.RequestReconcile(ctx, env.Client, src)
	g.Expect(err).NotTo(HaveOccurred())
	published = fluxsc.Wait(t, env.Client, src, fluxTimeout, fluxsc.Revision(rev2))
	s = waitStack(t, ns, "flux", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		ready(g, s)
		g.Expect(s.Status.LastUpdate.LastSuccessfulCommit).To(Equal(rev2))
	})
	g.Expect(readFile(g, target)).To(Equal("second artifact"))
	g.Expect(s.Status.LastUpdate.LastAttemptedCommit).To(Equal(rev2))
	g.Expect(s.Status.History).To(HaveLen(2))
	g.Expect(s.Status.History[0].Trigger).To(Equal(string(stack.TriggerRevision)))
	g.Expect(s.Status.History[0].Commit).To(Equal(rev2))
	g.Expect(getWorkspace(g, ns, "flux").Spec.Flux.Digest).To(Equal(fluxsc.Artifact(published).Digest))
}
