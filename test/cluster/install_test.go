//go:build cluster

package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// The names both packagings give the operator (docs/install.md).
const (
	release   = "stackyard"
	releaseNS = "stackyard-system"
	// workspaceSA is the ServiceAccount workspace pods run as, bound to
	// system:auth-delegator (the chart's workspaces.serviceAccountName).
	workspaceSA = "pulumi"
	// keepLabel marks the objects of config/default that an uninstall
	// leaves: the CRDs.
	keepLabel = "stackyard.dev/keep-on-uninstall"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// cluster is the test cluster's clients.
type cluster struct {
	cs     kubernetes.Interface
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func connect(t *testing.T) *cluster {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath())
	if err != nil {
		t.Fatalf("kubeconfig %s (is the cluster up? hack/cluster/up.sh): %v", kubeconfigPath(), err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	return &cluster{
		cs:     cs,
		dyn:    dynamic.NewForConfigOrDie(cfg),
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery())),
	}
}

// images are the tags `make images` built, checked to be on the node.
type images struct {
	registry string // ghcr.io/stackyard
	tag      string // the operator's and the agent's
}

func (i images) operator() string { return i.registry + "/stackyard:" + i.tag }
func (i images) agent() string    { return i.registry + "/stackyard-agent:" + i.tag }

func requireImages(t *testing.T, c *cluster) images {
	t.Helper()
	tags := imageTags(t)
	img := images{registry: "ghcr.io/stackyard", tag: tags["ghcr.io/stackyard/stackyard"]}
	if img.tag == "" || tags["ghcr.io/stackyard/stackyard-agent"] != img.tag {
		t.Fatalf("dist/images/digests.txt has no operator and agent image of one tag: %v (make images)", tags)
	}
	for _, ref := range []string{img.operator(), img.agent()} {
		if nodeImage(t, c.cs, ref) == "" {
			t.Fatalf("%s is not on the node (make images, then restart the cluster or import dist/images/*.tar)", ref)
		}
	}
	return img
}

// installer is one way of installing the operator: the Helm chart or the
// kustomization, each the way docs/install.md tells a user to.
type installer struct {
	name string
	// install installs the operator with workspace pods allowed in
	// wsNamespace (its ServiceAccount bound to system:auth-delegator) and
	// waits for the operator to run.
	install func(t *testing.T, img images, wsNamespace string) installation
}

// installation is what an installer did.
type installation struct {
	// objects are every object the install created.
	objects []*unstructured.Unstructured
	// uninstall removes them again, as the documentation says.
	uninstall func(t *testing.T)
}

// helmInstaller installs deploy/helm/stackyard with bin/helm, the
// workspace ServiceAccount from the chart's workspaces.namespaces.
var helmInstaller = installer{
	name: "helm",
	install: func(t *testing.T, img images, wsNamespace string) installation {
		chart := filepath.Join(repoRoot(t), "deploy", "helm", "stackyard")
		helm(t, "install", release, chart, "--namespace", releaseNS, "--create-namespace",
			"--set", "image.repository="+img.registry+"/stackyard", "--set-string", "image.tag="+img.tag,
			"--set", "idleAfter=20s",
			"--set", "workspaces.namespaces={"+wsNamespace+"}",
			"--wait", "--timeout", "3m")
		return installation{
			objects: decodeObjects(t, []byte(helm(t, "get", "manifest", release, "--namespace", releaseNS))),
			uninstall: func(t *testing.T) {
				helm(t, "uninstall", release, "--namespace", releaseNS, "--wait", "--timeout", "2m")
				// Helm leaves the namespace it created, with the Lease
				// the operator made there; docs/install.md deletes both.
				kubectl(t, "delete", "namespace", releaseNS, "--wait", "--timeout=2m")
			},
		}
	},
}

// kustomizeInstaller applies an overlay of config/default with kubectl, as
// docs/install.md shows, with the images set to the tag built and a
// shorter idle time. The workspace ServiceAccount and its binding are made
// with kubectl, as the documentation says.
var kustomizeInstaller = installer{
	name: "kustomize",
	install: func(t *testing.T, img images, wsNamespace string) installation {
		overlay := kustomizeOverlay(t, img, `
patches:
- target:
    kind: Deployment
    name: stackyard
  patch: |-
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: --idle-after=20s
`)
		binding := wsNamespace + "-" + workspaceSA + "-auth-delegator"
		kubectl(t, "apply", "--server-side", "-k", overlay)
		objs := decodeObjects(t, []byte(kubectl(t, "kustomize", overlay)))
		kubectl(t, "--namespace", wsNamespace, "create", "serviceaccount", workspaceSA)
		kubectl(t, "create", "clusterrolebinding", binding,
			"--clusterrole=system:auth-delegator", "--serviceaccount="+wsNamespace+":"+workspaceSA)
		kubectl(t, "--namespace", releaseNS, "rollout", "status", "deployment/stackyard", "--timeout=3m")
		sa := &unstructured.Unstructured{}
		sa.SetAPIVersion("v1")
		sa.SetKind("ServiceAccount")
		sa.SetNamespace(wsNamespace)
		sa.SetName(workspaceSA)
		crb := &unstructured.Unstructured{}
		crb.SetAPIVersion("rbac.authorization.k8s.io/v1")
		crb.SetKind("ClusterRoleBinding")
		crb.SetName(binding)
		return installation{
			objects: append(objs, sa, crb),
			uninstall: func(t *testing.T) {
				kubectl(t, "delete", "-k", overlay, "--selector", keepLabel+"!=true", "--wait", "--timeout=3m")
				kubectl(t, "--namespace", wsNamespace, "delete", "serviceaccount", workspaceSA)
				kubectl(t, "delete", "clusterrolebinding", binding)
			},
		}
	},
}

// kustomizeOverlay writes an overlay of config/default with the images set
// to img, plus extra, in a directory standing for a clone of the
// repository (config/ links to this one's), so that it names its base by
// the relative path a user's overlay would.
func kustomizeOverlay(t *testing.T, img images, extra string) string {
	t.Helper()
	dir := t.TempDir()
	overlay := filepath.Join(dir, "overlay")
	if err := os.Mkdir(overlay, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(repoRoot(t), "config"), filepath.Join(dir, "config")); err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../config/default
images:
- name: ghcr.io/stackyard/stackyard
  newName: %s/stackyard
  newTag: %q
`, img.registry, img.tag) + extra
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return overlay
}

// tearDown removes, as far as it can, an installation by either packaging
// that a failed test left, with wsNamespace and its workspace binding:
// config/default holds the names of the objects of any overlay of it.
// Every step may find nothing to do; failures are only logged.
func tearDown(t *testing.T, c *cluster, wsNamespace string) {
	root := repoRoot(t)
	try := func(name string, args ...string) {
		cmd := exec.Command(filepath.Join(root, "bin", name), append(args, "--kubeconfig", kubeconfigPath())...)
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("tear-down: %s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	if _, err := c.cs.CoreV1().Namespaces().Get(context.Background(), releaseNS, metav1.GetOptions{}); err == nil {
		try("helm", "uninstall", release, "--namespace", releaseNS, "--ignore-not-found", "--wait", "--timeout=2m")
	}
	try("kubectl", "delete", "-k", filepath.Join(root, "config", "default"), "--selector", keepLabel+"!=true", "--ignore-not-found", "--wait=false")
	// With the operator gone nothing would remove the finalizers of what
	// is left in the Stacks' namespace, which would then never go.
	ctx := context.Background()
	for _, gvr := range []schema.GroupVersionResource{
		stackGVR, workspaceGVR,
		{Group: "auto.pulumi.com", Version: "v1alpha1", Resource: "updates"},
		{Group: "pulumi.com", Version: "v1", Resource: "programs"},
	} {
		l, err := c.dyn.Resource(gvr).Namespace(wsNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, o := range l.Items {
			if len(o.GetFinalizers()) > 0 {
				_, err := c.dyn.Resource(gvr).Namespace(wsNamespace).Patch(ctx, o.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
				if err != nil {
					t.Logf("tear-down: removing the finalizers of %s %s: %v", gvr.Resource, o.GetName(), err)
				}
			}
		}
	}
	try("kubectl", "delete", "clusterrolebinding", wsNamespace+"-"+workspaceSA+"-auth-delegator", "--ignore-not-found")
	try("kubectl", "delete", "namespace", wsNamespace, releaseNS, "--ignore-not-found", "--wait", "--timeout=3m")
}

// kubectl runs bin/kubectl against the cluster and returns its standard
// output, failing the test with its error output if it fails.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot(t), "bin", "kubectl"), append([]string{"--kubeconfig", kubeconfigPath()}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return string(out)
}

// decodeObjects reads a stream of YAML documents.
func decodeObjects(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("decoding manifests: %v", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// leftovers lists what outlived an uninstall: any installed object but the
// CRDs, any workspace StatefulSet or pod, and the release namespace if the
// uninstall was to remove it (or, if it stays, any pod or Lease in it).
func leftovers(ctx context.Context, c *cluster, installed []*unstructured.Unstructured) []string {
	var left []string
	for _, o := range installed {
		if o.GetKind() == "CustomResourceDefinition" {
			continue
		}
		gvk := o.GroupVersionKind()
		m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			left = append(left, fmt.Sprintf("%s %s: %v", gvk.Kind, o.GetName(), err))
			continue
		}
		var ri dynamic.ResourceInterface = c.dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = c.dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		got, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			left = append(left, fmt.Sprintf("%s %s/%s: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err))
		default:
			state := ""
			if got.GetDeletionTimestamp() != nil {
				state = " (terminating)"
			}
			left = append(left, fmt.Sprintf("%s %s/%s%s", gvk.Kind, o.GetNamespace(), o.GetName(), state))
		}
	}
	ws := metav1.ListOptions{LabelSelector: "auto.pulumi.com/component"}
	if l, err := c.cs.AppsV1().StatefulSets("").List(ctx, ws); err != nil {
		left = append(left, "StatefulSets: "+err.Error())
	} else {
		for _, o := range l.Items {
			left = append(left, "StatefulSet "+o.Namespace+"/"+o.Name)
		}
	}
	if l, err := c.cs.CoreV1().Pods("").List(ctx, ws); err != nil {
		left = append(left, "Pods: "+err.Error())
	} else {
		for _, o := range l.Items {
			left = append(left, "Pod "+o.Namespace+"/"+o.Name)
		}
	}
	if ns, err := c.cs.CoreV1().Namespaces().Get(ctx, releaseNS, metav1.GetOptions{}); err == nil {
		left = append(left, "Namespace "+ns.Name+" ("+string(ns.Status.Phase)+")")
	} else if !apierrors.IsNotFound(err) {
		left = append(left, "Namespace "+releaseNS+": "+err.Error())
	}
	return left
}

// waitNoLeftovers waits for leftovers to be empty: pods go after their
// owners, through the garbage collector and their grace period.
func waitNoLeftovers(t *testing.T, c *cluster, installed []*unstructured.Unstructured) {
	t.Helper()
	var left []string
	_ = wait.PollUntilContextTimeout(t.Context(), 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		left = leftovers(ctx, c, installed)
		return len(left) == 0, nil
	})
	if len(left) > 0 {
		t.Errorf("the uninstall left operator-owned objects behind:\n%s", strings.Join(left, "\n"))
	}
}

// stackyardCRDs lists the CRDs of stackyard's API groups on the cluster.
func stackyardCRDs(ctx context.Context, c *cluster) ([]string, error) {
	l, err := c.dyn.Resource(crdGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, o := range l.Items {
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		switch group {
		case "pulumi.com", "auto.pulumi.com", "promotion.stackyard.dev", "notification.stackyard.dev":
			names = append(names, o.GetName())
		}
	}
	return names, nil
}

// leftCRDs checks that an uninstall left every CRD of config/crd/bases
// (which Helm keeps, and the kustomize path leaves too), and no more.
func leftCRDs(ctx context.Context, t *testing.T, c *cluster) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	if crds, err := stackyardCRDs(ctx, c); err != nil || len(crds) != len(files) {
		t.Errorf("the uninstall should leave the %d CRDs of config/crd/bases: %v %v", len(files), crds, err)
	}
}

// removeCRDs deletes stackyard's CRDs, which every uninstall leaves, so
// that the next test installs on a cluster without them (Helm refuses to
// adopt CRDs another tool created).
func removeCRDs(t *testing.T, c *cluster) {
	t.Helper()
	ctx := context.Background()
	names, err := stackyardCRDs(ctx, c)
	if err != nil {
		t.Errorf("listing CRDs: %v", err)
		return
	}
	for _, n := range names {
		if err := c.dyn.Resource(crdGVR).Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting CRD %s: %v", n, err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		names, err := stackyardCRDs(ctx, c)
		return err == nil && len(names) == 0, nil
	})
	if err != nil {
		names, _ := stackyardCRDs(ctx, c)
		t.Errorf("CRDs still there after deleting them: %v", names)
	}
}
