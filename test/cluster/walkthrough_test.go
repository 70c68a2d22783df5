//go:build cluster

package cluster_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackyard/stackyard/test/fluxkc"
	"github.com/stackyard/stackyard/test/fluxsc"
	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/testenv"
)

// TestWalkthrough runs docs/walkthrough.md as a reader would, every ```sh
// block in order: from a clean cluster, the operator installed with an
// approver for prod, a program and its manifests pushed to a git
// repository served to the cluster, Flux applying the manifests as a
// governor, a release taken by dev on its own and by prod once alice
// approved it, and a change to prod made in git held until she approved
// it too; then everything removed.
//
// Flux's source-controller and kustomize-controller are the real ones,
// built from their Go modules, but they run as processes on the node
// rather than as pods: the guide assumes Flux installed (`flux install`
// pulls its images, which this machine cannot), and starts from there.
// They reconcile every GitRepository and Kustomization, as an installed
// Flux does.
//
// Besides the output blocks, it checks what the guide promises without
// printing it: after Flux synced again, prod's commit is still the one
// the promotion wrote, and owned by the promotion alone.
func TestWalkthrough(t *testing.T) {
	c := connect(t)
	img := requireImages(t, c)
	root := repoRoot(t)
	const ns = "shop"
	startFlux(t, root)
	// Registered after Flux, so run before it stops: Flux removes the
	// finalizers of its objects as the namespace goes.
	t.Cleanup(func() { cleanUpGuide(t, c, ns) })

	clone, env := guideSession(t, root, img)
	gs := gitserver.New(t)
	repo := gs.CreateRepo("shop")
	repo.Git("config", "http.receivepack", "true")
	env = append(env, "SHOP_REPO="+serveGitOnNode(t, gs)+"/shop.git")

	r := newDocRun(t, clone, env)
	r.run(t, filepath.Join(root, "docs", "walkthrough.md"), []docCheck{
		{after: "annotate kustomization shop", check: func(t *testing.T) {
			prod, err := c.dyn.Resource(stackGVR).Namespace(ns).Get(t.Context(), "shop-prod", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			commit, _, _ := unstructured.NestedString(prod.Object, "spec", "commit")
			if head := repo.Head("main"); commit != head {
				t.Errorf("after Flux synced again, prod's spec.commit is %s, want %s, the commit the promotion wrote", commit, head)
			}
			if m := testenv.FieldManagers(prod, "f:spec", "f:commit"); len(m) != 1 || m[0] != "stackyard-promotion" {
				t.Errorf("prod's spec.commit is managed by %v, want stackyard-promotion alone", m)
			}
		}},
	})
}

// startFlux installs Flux's CRDs on the cluster and runs its
// source-controller and kustomize-controller against it, each as a
// ServiceAccount bound to the ClusterRole Flux ships for it, until the
// test ends; then the CRDs are deleted.
func startFlux(t *testing.T, root string) {
	t.Helper()
	if err := testenv.RequireBinaries(append(fluxsc.Required(), fluxkc.Required()...)...); err != nil {
		t.Fatal(err)
	}
	kubectl := func(args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(root, "bin", "kubectl"), append(args, "--kubeconfig", kubeconfigPath())...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	crds := fluxsc.CRDDir()
	kubectl("apply", "--server-side", "-f", crds)
	t.Cleanup(func() {
		// Not waited for: a Kustomization a failed guide left keeps its
		// finalizer once the controllers are gone, and its CRD goes with
		// the cluster.
		cmd := exec.Command(filepath.Join(root, "bin", "kubectl"), "delete", "-f", crds, "--ignore-not-found", "--wait=false", "--kubeconfig", kubeconfigPath())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("removing Flux's CRDs: %v\n%s", err, out)
		}
	})
	kubectl("wait", "--for=condition=Established", "--timeout=1m", "-f", crds)

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	cl, err := crclient.New(cfg, crclient.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	env := &testenv.Env{Config: cfg, Client: cl, Scheme: clientgoscheme.Scheme}
	fluxsc.Start(t, env, fluxsc.Everything())
	fluxkc.Start(t, env, fluxkc.Everything())
}
