// Package fluxkc runs Flux's kustomize-controller for tests: the real
// binary, built by `make test-gitops` from the release pinned in
// tools/flux, as a process against the test control plane (test/testenv),
// with the ClusterRole Flux ships for it. It downloads what a source
// (test/fluxsc) packed, builds the Kustomization's directory and applies
// it by server-side apply, forced, under its own field manager, exactly as
// in a cluster. A Kustomization that names spec.serviceAccountName is
// applied as that ServiceAccount (the controller impersonates it), so the
// objects it writes pass the real RBAC and admission policies as that
// identity.
//
// Each Controller reconciles only the Kustomizations labelled for it
// (LabelKey, through --watch-label-selector); one started with Everything
// reconciles every Kustomization, as in a cluster.
package fluxkc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stackyard/stackyard/test/testenv"
)

// Binary is the name of the kustomize-controller binary in testenv.BinDir().
const Binary = "kustomize-controller"

// Group is the API group of Flux's Kustomization, and APIVersion the
// version the tests create it in.
const (
	Group      = "kustomize.toolkit.fluxcd.io"
	APIVersion = Group + "/v1"
)

// FieldManager is the field manager kustomize-controller applies with.
const FieldManager = "kustomize-controller"

// LabelKey is the label whose value names the Controller that reconciles a
// Kustomization.
const LabelKey = "test.stackyard.dev/kustomize-controller"

// namespace is where the controllers' ServiceAccounts live, as Flux's do.
const namespace = "flux-system"

// startTimeout bounds how long the controller may take to become ready.
const startTimeout = time.Minute

// RoleFile is where `make` (mk/flux.mk) copies the ClusterRole Flux ships
// for kustomize-controller.
func RoleFile() string { return filepath.Join(testenv.BinDir(), "flux", "kustomize-role.yaml") }

// Required lists what the package needs in testenv.BinDir(), for
// testenv.RequireBinaries.
func Required() []string {
	return []string{Binary, filepath.Join("flux", "kustomize-role.yaml"),
		filepath.Join("crds", "flux", "kustomize.toolkit.fluxcd.io_kustomizations.yaml")}
}

// Controller is a running kustomize-controller, stopped when the test that
// started it ends.
type Controller struct {
	// Label is the value of LabelKey on the Kustomizations it reconciles.
	Label string
}

var started atomic.Int64

// Start runs kustomize-controller against env as a ServiceAccount bound to
// Flux's ClusterRole for it, reconciling the Kustomizations labelled for
// the new Controller in every namespace, and waits until it is ready.
//
// Flux's install binds kustomize-controller to cluster-admin, which lets
// it impersonate the ServiceAccount a Kustomization names; here its
// credentials are the test administrator's, impersonating its own
// ServiceAccount for its own reads, so its impersonation of a
// Kustomization's ServiceAccount is allowed the same way.
func Start(t testing.TB, env *testenv.Env, opts ...Option) *Controller {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if err := testenv.RequireBinaries(Required()...); err != nil {
		t.Fatal(err)
	}
	c := &Controller{Label: fmt.Sprintf("kc-%d-%d", os.Getpid(), started.Add(1))}
	cfg, err := env.ServiceAccountConfig(context.Background(), namespace, "kustomize-controller-"+c.Label, RoleFile())
	if err != nil {
		t.Fatalf("kustomize-controller's ServiceAccount: %v", err)
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := testenv.WriteKubeconfig(cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	testenv.StartListening(t, 2, func(addrs []string) (*testenv.Daemon, error) {
		metricsAddr, healthAddr := addrs[0], addrs[1]
		daemon := testenv.StartDaemon(t, Binary, append(o.selector(c.Label), []string{
			"--metrics-addr=" + metricsAddr,
			"--health-addr=" + healthAddr,
			"--enable-leader-election=false",
			"--watch-all-namespaces=true",
			"--log-encoding=console",
			// No notification-controller here.
			"--events-addr=",
		}...), []string{
			"KUBECONFIG=" + kubeconfig,
			"RUNTIME_NAMESPACE=" + namespace,
			"TMPDIR=" + tmp,
			"HOME=" + dir,
		})
		return daemon, daemon.AwaitHTTP("http://"+healthAddr+"/readyz", func(status int) bool { return status == 200 }, startTimeout)
	})
	return c
}

// Own labels obj so that this controller reconciles it; call it before
// creating obj.
func (c *Controller) Own(obj *unstructured.Unstructured) *unstructured.Unstructured {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelKey] = c.Label
	obj.SetLabels(labels)
	return obj
}

// Option changes how Start runs the controller.
type Option func(*options)

// options are what the Options set.
type options struct {
	everything bool
}

// Everything makes the controller reconcile every one of the Kustomizations of
// the cluster, labelled for it or not, as an installed Flux does: for a
// cluster where no other controller of its kind runs, and manifests
// written for any Flux (a guide's).
func Everything() Option { return func(o *options) { o.everything = true } }

// selector is the flag that restricts the controller to the objects
// labelled with label, unless it reconciles everything.
func (o options) selector(label string) []string {
	if o.everything {
		return nil
	}
	return []string{"--watch-label-selector=" + LabelKey + "=" + label}
}
