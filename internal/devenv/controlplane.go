// Package devenv runs stackyard on a developer's machine without a cluster:
// an embedded control plane (etcd and kube-apiserver from bin/, on loopback)
// whose state lives in a directory that survives restarts, with stackyard's
// CRDs installed and a kubeconfig written for kubectl.
package devenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options says where the control plane finds its binaries and CRDs and keeps
// its state.
type Options struct {
	// StateDir holds etcd's data, the API server's certificates and the
	// kubeconfig. Keeping it keeps every object across restarts.
	StateDir string
	// BinDir holds etcd and kube-apiserver (built by `make tools`).
	BinDir string
	// CRDDir holds the CRD manifests to install (config/crd/bases).
	CRDDir string
	// PolicyDir holds the admission policies to apply (config/policy);
	// empty applies none.
	PolicyDir string
	// WebhookDir holds the operator's admission webhook configurations
	// (config/webhook): the edit stamp and the read check are installed
	// to call the operator on a loopback port (ControlPlane.Webhooks);
	// empty installs none.
	WebhookDir string
}

// WebhookFiles are the webhook configurations of WebhookDir that stackyard
// dev installs.
var WebhookFiles = []string{"edit-stamp.yaml", "read-check.yaml"}

// Webhooks is where the API server calls the operator's admission
// webhooks: the operator serves them there, on loopback.
type Webhooks struct {
	// Addr is host:port.
	Addr string
	// Host is the address the serving certificate must cover.
	Host string
}

// ControlPlane is a running etcd + kube-apiserver pair.
type ControlPlane struct {
	env *envtest.Environment
	// Config reaches the API server as a cluster administrator.
	Config *rest.Config
	// KubeconfigPath is where the administrator kubeconfig was written.
	KubeconfigPath string
	// Webhooks is where the installed webhook configurations call; nil
	// when none were installed.
	Webhooks *Webhooks
}

// StartControlPlane starts etcd and kube-apiserver with state under
// opts.StateDir, installs the CRDs and writes a kubeconfig.
func StartControlPlane(opts Options) (*ControlPlane, error) {
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, name)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make tools`", name, opts.BinDir)
		}
	}
	// Objects live in etcd's data directory, which is kept. The API server's
	// certificates are made anew at every start: envtest only learns the CA
	// of certificates it generated itself, so reusing old ones cannot work.
	etcdDir := filepath.Join(opts.StateDir, "etcd")
	certDir := filepath.Join(opts.StateDir, "apiserver")
	if err := os.RemoveAll(certDir); err != nil {
		return nil, err
	}
	for _, dir := range []string{etcdDir, certDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    opts.BinDir,
		CRDDirectoryPaths:        []string{opts.CRDDir},
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	if opts.WebhookDir != "" {
		for _, f := range WebhookFiles {
			env.WebhookInstallOptions.Paths = append(env.WebhookInstallOptions.Paths, filepath.Join(opts.WebhookDir, f))
		}
		// The configurations call a loopback port; the operator serves
		// there with a certificate of its own, whose CA it sets as their
		// caBundle (internal/servingcert), over the one envtest set.
		env.WebhookInstallOptions.LocalServingHost = "127.0.0.1"
	}
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: etcdDir}
	env.ControlPlane.APIServer = &envtest.APIServer{CertDir: certDir}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // envtest leaves the processes up when installing CRDs fails
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	if opts.PolicyDir != "" {
		if err := applyPolicies(cfg, opts.PolicyDir); err != nil {
			_ = env.Stop()
			return nil, err
		}
	}
	cp := &ControlPlane{env: env, Config: cfg, KubeconfigPath: filepath.Join(opts.StateDir, "kubeconfig")}
	if w := env.WebhookInstallOptions; opts.WebhookDir != "" && w.LocalServingPort != 0 {
		cp.Webhooks = &Webhooks{Addr: net.JoinHostPort(w.LocalServingHost, strconv.Itoa(w.LocalServingPort)), Host: w.LocalServingHost}
	}
	if err := writeKubeconfig(cfg, cp.KubeconfigPath); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return cp, nil
}

// Stop shuts the control plane down; its state stays in StateDir.
func (c *ControlPlane) Stop() error { return c.env.Stop() }

// ServedCRDs lists the installed CRDs as "name (versions)" lines, so a
// developer sees at a glance what the API server serves.
func (c *ControlPlane) ServedCRDs(ctx context.Context) ([]string, error) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	cl, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	var list apiextensionsv1.CustomResourceDefinitionList
	if err := cl.List(ctx, &list); err != nil {
		return nil, err
	}
	var lines []string
	for _, crd := range list.Items {
		var versions []string
		for _, v := range crd.Spec.Versions {
			if v.Served {
				tag := v.Name
				if v.Storage {
					tag += "*"
				}
				versions = append(versions, tag)
			}
		}
		lines = append(lines, fmt.Sprintf("%s %v", crd.Name, versions))
	}
	sort.Strings(lines)
	return lines, nil
}

// writeKubeconfig writes an administrator kubeconfig for cfg (client
// certificate authentication, as envtest sets it up) to path.
func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["stackyard-dev"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["stackyard-dev"] = &clientcmdapi.Context{Cluster: "stackyard-dev", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "stackyard-dev"
	return clientcmd.WriteToFile(*kc, path)
}

// applyPolicies applies the admission policies in dir.
func applyPolicies(cfg *rest.Config, dir string) error {
	cl, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	if err := ApplyDir(context.Background(), cl, dir); err != nil {
		return fmt.Errorf("applying the admission policies: %w", err)
	}
	return nil
}
