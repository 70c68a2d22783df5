// Package fluxsc runs Flux's source-controller for tests: the real binary,
// built by `make tools` from the release pinned in tools/flux, as a process
// against the test control plane (test/testenv), with the ClusterRole Flux
// ships for it and nothing more. It fetches what a GitRepository, Bucket or
// OCIRepository points at, packs it, serves the artifact from its own
// storage server on loopback and writes the source's status, exactly as in
// a cluster; the code under test reads that status and downloads the
// artifact.
//
// Each Controller reconciles only the sources labelled for it (LabelKey,
// through source-controller's --watch-label-selector), so tests that run
// side by side against one API server do not share a controller; one
// started with Everything reconciles every source, as in a cluster.
package fluxsc

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

// Binary is the name of the source-controller binary in testenv.BinDir().
const Binary = "source-controller"

// Group is the API group of Flux's source kinds, and APIVersion the
// version the tests create them in.
const (
	Group      = "source.toolkit.fluxcd.io"
	APIVersion = Group + "/v1"
)

// LabelKey is the label whose value names the Controller that reconciles
// a source.
const LabelKey = "test.stackyard.dev/source-controller"

// namespace is where the controllers' ServiceAccounts live, as Flux's live
// in flux-system.
const namespace = "flux-system"

// startTimeout bounds how long source-controller may take to start serving.
const startTimeout = time.Minute

// CRDDir is where `make tools` (mk/flux.mk) copies Flux's source CRDs; pass
// it to testenv.Options.ExtraCRDDirs.
func CRDDir() string { return filepath.Join(testenv.BinDir(), "crds", "flux") }

// RoleFile is where `make tools` copies the ClusterRole Flux ships for
// source-controller.
func RoleFile() string { return filepath.Join(testenv.BinDir(), "flux", "role.yaml") }

// Required lists what the package needs in testenv.BinDir(), for
// testenv.RequireBinaries.
func Required() []string {
	return []string{Binary, filepath.Join("crds", "flux", ".version"), filepath.Join("flux", "role.yaml")}
}

// Controller is a running source-controller. It is stopped when the test
// that started it ends.
type Controller struct {
	// Label is the value of LabelKey on the sources it reconciles; it does
	// not see any other.
	Label string
	// StorageAddr is the host:port of its artifact server, which artifact
	// URLs name.
	StorageAddr string
}

// started numbers the controllers this process starts, for their labels.
var started atomic.Int64

// Start runs source-controller against env as a ServiceAccount bound to
// Flux's ClusterRole for it, reconciling the sources labelled for the new
// Controller in every namespace, and waits until it serves its probes and
// its artifacts. The test fails with a message to run `make tools` when a
// binary or manifest is missing.
func Start(t testing.TB, env *testenv.Env, opts ...Option) *Controller {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if err := testenv.RequireBinaries(Required()...); err != nil {
		t.Fatal(err)
	}
	c := &Controller{Label: fmt.Sprintf("sc-%d-%d", os.Getpid(), started.Add(1))}
	cfg, err := env.ServiceAccountConfig(context.Background(), namespace, "source-controller-"+c.Label, RoleFile())
	if err != nil {
		t.Fatalf("source-controller's ServiceAccount: %v", err)
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := testenv.WriteKubeconfig(cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	storage, tmp := filepath.Join(dir, "storage"), filepath.Join(dir, "tmp")
	for _, d := range []string{storage, tmp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// Its storage, metrics and health addresses; started again on others
	// when one was taken before it bound it.
	_, addrs := testenv.StartListening(t, 3, func(addrs []string) (*testenv.Daemon, error) {
		storageAddr, metricsAddr, healthAddr := addrs[0], addrs[1], addrs[2]
		daemon := testenv.StartDaemon(t, Binary, append(o.selector(c.Label), []string{
			"--storage-path=" + storage,
			"--storage-addr=" + storageAddr,
			"--storage-adv-addr=" + storageAddr,
			"--metrics-addr=" + metricsAddr,
			"--health-addr=" + healthAddr,
			"--enable-leader-election=false",
			"--watch-all-namespaces=true",
			"--log-encoding=console",
		}...), []string{
			"KUBECONFIG=" + kubeconfig,
			"RUNTIME_NAMESPACE=" + namespace,
			// Its git clones and downloads go to the test's directory.
			"TMPDIR=" + tmp,
			"HOME=" + dir,
		})
		if err := daemon.AwaitHTTP("http://"+healthAddr+"/readyz", func(status int) bool { return status == 200 }, startTimeout); err != nil {
			return daemon, err
		}
		// The artifact server answers 404 at its root once it listens.
		return daemon, daemon.AwaitHTTP("http://"+storageAddr+"/", func(status int) bool { return status > 0 }, startTimeout)
	})
	c.StorageAddr = addrs[0]
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

// Everything makes the controller reconcile every one of the sources of
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
