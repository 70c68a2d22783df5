// Package testenv starts the real control plane that stackyard's integration
// tests run against: etcd and kube-apiserver built by `make tools` into bin/,
// started by controller-runtime's envtest with the CRDs from config/crd/bases.
// There is no fake client anywhere in an integration test; this package is
// the one place that knows how the control plane is found and started.
package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// RepoRoot returns the repository's top directory, found from this source
// file's location so tests work from any package and any working directory.
func RepoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("testenv: cannot locate the source file")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// BinDir is where `make tools` puts the pinned binaries (etcd, kube-apiserver,
// kubectl, pulumi, pulumi-language-yaml, the test provider).
func BinDir() string { return filepath.Join(RepoRoot(), "bin") }

// RequireBinaries returns an error naming every binary missing from BinDir,
// telling the developer how to build them. Tests fail on it rather than skip:
// a suite that silently does nothing is worse than a red one.
func RequireBinaries(names ...string) error {
	var missing []string
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(BinDir(), name)); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %v in %s: run `make tools` (or `make test`, which builds them)", missing, BinDir())
	}
	return nil
}

// Env is a running control plane with a client for it.
type Env struct {
	// Environment is the envtest environment; Stop it when done.
	Environment *envtest.Environment
	// Config reaches the API server as a cluster administrator.
	Config *rest.Config
	// Client is a controller-runtime client using Scheme.
	Client client.Client
	// Scheme knows the built-in kinds, the CRD types and whatever the
	// caller added through Options.AddToScheme.
	Scheme *k8sruntime.Scheme
}

// Options tunes Start. The zero value starts the API server with the CRDs
// from config/crd/bases and a scheme of the built-in kinds.
type Options struct {
	// AddToScheme registers further types (the stackyard API packages) with
	// the client's scheme.
	AddToScheme []func(*k8sruntime.Scheme) error
	// ExtraCRDDirs adds directories of CRD manifests (e.g. Flux's source
	// CRDs) to install alongside stackyard's own.
	ExtraCRDDirs []string
	// CRDs are installed in addition to those read from directories.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// Webhooks are manifests of admission webhook configurations (files
	// under config/webhook) to install: envtest points them at a local
	// address, with a serving certificate of its own, where
	// Env.ServeWebhooks serves them.
	Webhooks []string
}

// Start brings up etcd and kube-apiserver from BinDir and installs the CRDs.
// It fails with a clear message when the binaries have not been built.
func Start(opts Options) (*Env, error) {
	if err := RequireBinaries("etcd", "kube-apiserver"); err != nil {
		return nil, err
	}
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	for _, add := range opts.AddToScheme {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    BinDir(),
		CRDDirectoryPaths:        append([]string{filepath.Join(RepoRoot(), "config", "crd", "bases")}, opts.ExtraCRDDirs...),
		CRDs:                     opts.CRDs,
		ErrorIfCRDPathMissing:    true,
		Scheme:                   scheme,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
		WebhookInstallOptions:    envtest.WebhookInstallOptions{Paths: opts.Webhooks},
	}
	if path := os.Getenv(AuditLogEnv); path != "" {
		if err := auditWrites(env, path); err != nil {
			return nil, err
		}
	}
	cfg, err := env.Start()
	if err != nil {
		// envtest leaves etcd and kube-apiserver running when a later step
		// (installing the CRDs) fails; stop them so no process outlives us.
		_ = env.Stop()
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", BinDir(), err)
	}
	// Tests create many objects quickly; the default client-side limit of 5
	// requests per second would make them wait on the client, not the server.
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &Env{Environment: env, Config: cfg, Client: c, Scheme: scheme}, nil
}

// AuditLogEnv names the environment variable that, set to a file path,
// makes the API server log every write it serves there (audit level
// Request): who wrote what, in what order. It shows which requests a
// reconcile sends, as when counting the writes of a burst.
const AuditLogEnv = "TESTENV_AUDIT_LOG"

// auditPolicy logs the writes with their request bodies, once each.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Request
  verbs: [create, update, patch, delete, deletecollection]
`

// auditWrites makes env's API server log its writes to path.
func auditWrites(env *envtest.Environment, path string) error {
	policy := path + ".policy.yaml"
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil { //nolint:gosec // the test API server's audit policy, in its own directory
		return fmt.Errorf("%s: writing the audit policy: %w", AuditLogEnv, err)
	}
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", path)
	return nil
}

// Stop shuts the control plane down.
func (e *Env) Stop() error { return e.Environment.Stop() }

// NewNamespace creates a namespace with a generated name starting with
// prefix, for one test, and returns its name. It is not deleted afterwards:
// without a namespace controller a deleted namespace only turns
// Terminating, which changes how controllers treat what is in it.
func (e *Env) NewNamespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	return ns.Name
}
