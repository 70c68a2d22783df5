// Package argocdrun runs Argo CD for tests: its application controller and
// repo server, the real binary built by `make test-gitops` from the
// release pinned in tools/argocd, as processes against the test control
// plane (test/testenv), with Debian's redis-server as their cache, on a
// unix socket. The repo server clones from git over HTTP (test/gitserver)
// and renders a directory of plain manifests; the controller compares them
// with the live objects, syncs, and reads each object's health, Stacks'
// through the project's own health script (config/argocd), set in
// argocd-cm exactly as docs/argocd.md tells a user to.
//
// Argo CD runs here without its API server, UI, Dex or ApplicationSet
// controller: the tests create Applications and read their status as
// objects, as a user of `kubectl` would. Each instance has a namespace of
// its own for its settings, its clusters and its Applications, and its
// in-cluster destination is disabled: it reaches the test API server only
// through a cluster Secret (AddCluster), with whatever credentials the
// test gives it.
package argocdrun

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/stackyard/stackyard/test/testenv"
)

// Binary is the name of Argo CD's binary in testenv.BinDir(); it runs as
// the component its environment's ARGOCD_BINARY_NAME names.
const Binary = "argocd"

// Group is the API group of Argo CD's kinds, and APIVersion the version
// the tests create them in.
const (
	Group      = "argoproj.io"
	APIVersion = Group + "/v1alpha1"
)

// Install is the command that installs what the package needs, for the
// messages of a test that finds it missing.
const Install = "`make test-gitops` (or `make argocd-tools`)"

// startTimeout bounds how long a component may take to serve.
const startTimeout = 2 * time.Minute

// partOf is the label Argo CD's settings informers select its ConfigMaps
// and Secrets by.
var partOf = map[string]string{"app.kubernetes.io/part-of": "argocd"}

// CRDDir is where `make` (mk/argocd.mk) copies Argo CD's Application and
// AppProject CRDs, for testenv to install.
func CRDDir() string { return filepath.Join(testenv.BinDir(), "crds", "argocd") }

// Required lists what the package needs in testenv.BinDir(), for
// testenv.RequireBinaries.
func Required() []string {
	return []string{Binary, filepath.Join("crds", "argocd", ".version"), filepath.Join("argocd-path", "git-verify-wrapper.sh")}
}

// HealthScriptKey is the argocd-cm key of a custom health check for
// Stacks, and HealthPatch the merge patch the project ships that sets it.
const HealthScriptKey = "resource.customizations.health.pulumi.com_Stack"

// HealthPatch is config/argocd/argocd-cm-patch.yaml.
func HealthPatch() string {
	return filepath.Join(testenv.RepoRoot(), "config", "argocd", "argocd-cm-patch.yaml")
}

// ArgoCD is a running application controller and repo server, stopped
// when the test that started them ends.
type ArgoCD struct {
	// Namespace holds its settings (argocd-cm, argocd-secret), its
	// clusters, its AppProject "default" and its Applications.
	Namespace string

	env *testenv.Env
}

var started atomic.Int64

// Start runs Argo CD against env with argocd-cm holding settings on top of
// the project's health check for Stacks (read from HealthPatch, as a user
// applies it) and of what running outside a cluster needs: no in-cluster
// destination, and resources it may not list skipped
// (resource.respectRBAC), since a scoped identity cannot list everything.
// The controller reads its own objects as the test administrator; what it
// applies to a destination goes with the credentials of that
// destination's cluster Secret. It waits until both components serve.
func Start(t testing.TB, env *testenv.Env, settings map[string]string) *ArgoCD {
	t.Helper()
	if err := testenv.RequireBinaries(Required()...); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a := &ArgoCD{Namespace: fmt.Sprintf("argocd-%d-%d", os.Getpid(), started.Add(1)), env: env}
	if err := a.configure(ctx, settings); err != nil {
		t.Fatalf("configuring Argo CD: %v", err)
	}

	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := testenv.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	redis := startRedis(t, dir)
	common := []string{
		// The repo server runs git-verify-wrapper.sh from PATH.
		"PATH=" + filepath.Join(testenv.BinDir(), "argocd-path") + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + dir,
		"TMPDIR=" + tmp,
		// No GnuPG here, and no commit signatures to verify.
		"ARGOCD_GPG_ENABLED=false",
		// The repo server's credential helper listens on a socket, by
		// default a fixed path in /tmp that two instances would share.
		"ARGOCD_ASK_PASS_SOCK=" + filepath.Join(dir, "askpass.sock"),
	}

	_, repoAddrs := testenv.StartListening(t, 2, func(addrs []string) (*testenv.Daemon, error) {
		host, port := splitAddr(addrs[0])
		_, metricsPort := splitAddr(addrs[1])
		d := testenv.StartDaemon(t, Binary, []string{
			"--address=" + host, "--port=" + port,
			"--metrics-address=" + host, "--metrics-port=" + metricsPort,
			// Plain gRPC on loopback, and no client certificate to ask for
			// (the default path is a Secret mounted in a pod).
			"--disable-tls", "--client-ca-path=",
			"--redis=" + redis,
			// A branch's head is cached for 3 minutes by default: a real
			// Argo CD learns of a push from its webhook, which clears
			// it. Here it polls, so the cache would hide a new commit.
			"--revision-cache-expiration=1s",
			"--logformat=text",
		}, append([]string{"ARGOCD_BINARY_NAME=argocd-repo-server"}, common...))
		return d, d.AwaitHTTP("http://"+addrs[1]+"/healthz", func(status int) bool { return status == 200 }, startTimeout)
	})
	testenv.StartListening(t, 1, func(addrs []string) (*testenv.Daemon, error) {
		_, metricsPort := splitAddr(addrs[0])
		d := testenv.StartDaemon(t, Binary, []string{
			"--kubeconfig=" + kubeconfig,
			"--namespace=" + a.Namespace,
			"--repo-server=" + repoAddrs[0], "--repo-server-plaintext",
			"--redis=" + redis,
			"--metrics-port=" + metricsPort,
			// Compare every few seconds rather than every three minutes,
			// so that a test sees a new revision soon.
			"--app-resync=5",
			"--self-heal-timeout-seconds=2",
			"--status-processors=2", "--operation-processors=2",
			// Record each object's health in the Application's status
			// (Argo CD 3 keeps it only in redis by default), where the
			// tests read it.
			"--persist-resource-health",
			"--logformat=text",
		}, append([]string{"ARGOCD_BINARY_NAME=argocd-application-controller"}, common...))
		return d, d.AwaitHTTP("http://"+addrs[0]+"/healthz", func(status int) bool { return status == 200 }, startTimeout)
	})
	return a
}

// startRedis runs redis-server on a unix socket in dir, with nothing
// persisted, and returns the socket's path once it accepts connections.
func startRedis(t testing.TB, dir string) string {
	t.Helper()
	sock := filepath.Join(dir, "redis.sock")
	d := testenv.StartSystemDaemon(t, "redis-server", Install, []string{
		"--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", dir,
	}, nil)
	deadline := time.Now().Add(startTimeout)
	for !strings.Contains(strings.ToLower(d.Output()), "ready to accept connections") {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server is not ready after %s:\n%s", startTimeout, d.Tail(50))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return sock
}

// configure makes the instance's namespace, argocd-cm, argocd-secret and
// the AppProject "default", which lets an Application deploy anything
// anywhere (the cluster Secret's credentials are what bound it).
func (a *ArgoCD) configure(ctx context.Context, settings map[string]string) error {
	c := a.env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: a.Namespace}}); err != nil {
		return err
	}
	data, err := healthSettings()
	if err != nil {
		return err
	}
	data["cluster.inClusterEnabled"] = "false"
	data["resource.respectRBAC"] = "normal"
	for k, v := range settings {
		data[k] = v
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: "argocd-cm", Labels: partOf}, Data: data}
	if err := c.Create(ctx, cm); err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: "argocd-secret", Labels: partOf},
		StringData: map[string]string{"server.secretkey": "argocdrun-" + a.Namespace},
	}
	if err := c.Create(ctx, secret); err != nil {
		return err
	}
	project := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": APIVersion, "kind": "AppProject",
		"metadata": map[string]any{"namespace": a.Namespace, "name": "default"},
		"spec": map[string]any{
			"sourceRepos":              []any{"*"},
			"destinations":             []any{map[string]any{"server": "*", "namespace": "*"}},
			"clusterResourceWhitelist": []any{map[string]any{"group": "*", "kind": "*"}},
		},
	}}
	return c.Create(ctx, project)
}

// healthSettings reads the data of the project's argocd-cm patch.
func healthSettings() (map[string]string, error) {
	raw, err := os.ReadFile(HealthPatch())
	if err != nil {
		return nil, err
	}
	var patch struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(raw, &patch); err != nil {
		return nil, fmt.Errorf("%s: %w", HealthPatch(), err)
	}
	if patch.Data[HealthScriptKey] == "" {
		return nil, fmt.Errorf("%s sets no %s", HealthPatch(), HealthScriptKey)
	}
	return patch.Data, nil
}

// AddCluster declares a destination cluster, as docs/argocd.md does for a
// scoped identity: a cluster Secret named name whose server is cfg's host,
// whose credentials are cfg's bearer token and CA, and which Argo CD uses
// only in namespaces (namespaced mode: no cluster-scoped resources). It
// returns the server URL an Application's destination names.
func (a *ArgoCD) AddCluster(ctx context.Context, name string, cfg *rest.Config, namespaces ...string) (string, error) {
	if cfg.BearerToken == "" {
		return "", fmt.Errorf("cluster %s: the config has no bearer token", name)
	}
	conn, err := json.Marshal(map[string]any{
		"bearerToken":     cfg.BearerToken,
		"tlsClientConfig": map[string]any{"caData": cfg.CAData, "insecure": false},
	})
	if err != nil {
		return "", err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: a.Namespace, Name: name,
			Labels: map[string]string{"argocd.argoproj.io/secret-type": "cluster"},
		},
		StringData: map[string]string{
			"name":             name,
			"server":           cfg.Host,
			"config":           string(conn),
			"namespaces":       strings.Join(namespaces, ","),
			"clusterResources": strconv.FormatBool(false),
		},
	}
	return cfg.Host, a.env.Client.Create(ctx, secret)
}

// Application returns an Application named name in the instance's
// namespace, in project default, with spec.
func (a *ArgoCD) Application(name string, spec map[string]any) *unstructured.Unstructured {
	if _, ok := spec["project"]; !ok {
		spec["project"] = "default"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": APIVersion, "kind": "Application",
		"metadata": map[string]any{"namespace": a.Namespace, "name": name},
		"spec":     spec,
	}}
}

// splitAddr splits a loopback "host:port".
func splitAddr(addr string) (host, port string) {
	i := strings.LastIndexByte(addr, ':')
	return addr[:i], addr[i+1:]
}
