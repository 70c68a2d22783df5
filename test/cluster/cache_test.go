//go:build cluster

package cluster_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/programs/kubeprogram"
)

// TestWorkspaceCacheOnNode measures what the workspace cache saves. The
// agent image has no Kubernetes provider: `pulumi install` fetches it
// (about 245 MB unpacked) from a plugin mirror on the node, the way an
// air-gapped cluster serves plugins (PULUMI_PLUGIN_DOWNLOAD_URL_OVERRIDES).
// Two Stacks run the same program, one with the default cache claim and
// one opted out with an emptyDir in its pod template. Each deploys, idles
// to zero pods, and deploys a new commit from a cold start:
//   - the cached Stack's claim outlives its pod, and its cold start
//     fetches nothing;
//   - the opted-out Stack fetches the provider on every cold start;
//   - the workspace pods carry the kustomization's ephemeral-storage
//     request and limit.
//
// The times of the second, cold, updates are logged for
// docs/benchmarks.md; no assertion rests on them.
func TestWorkspaceCacheOnNode(t *testing.T) {
	c, img, ns, step := begin(t)
	ctx := t.Context()
	t.Cleanup(func() {
		for _, s := range []string{"-cached", "-uncached"} {
			_ = c.cs.CoreV1().Namespaces().Delete(context.Background(), ns+s, metav1.DeleteOptions{})
		}
	})
	installed := kustomizeInstaller.install(t, img, ns)
	grantProgram(t, c, ns, workspaceSA)
	version := providerVersion(t)
	mirror := servePluginMirror(t, version)
	step("installed; plugin mirror at %s serving kubernetes v%s", mirror.url, version)

	stateDir := hostStateDir(t, "cache-state-")
	gs := gitserver.New(t)
	repo := gs.CreateRepo("cached")
	v1 := repo.Commit("main", map[string]string{"Pulumi.yaml": kubeprogram.ProjectAt("one", true, version)})
	repoURL := serveGitOnNode(t, gs) + "/cached.git"

	newStack := func(name string, optOut bool) {
		s := programStack(t, ns, repoURL, v1, name, img.agent(), stateDir, ns+"-"+name)
		must(t, unstructured.SetNestedField(s.Object, map[string]any{"type": "Literal", "literal": map[string]any{"value": "^github://api.github.com/pulumi=" + mirror.url}},
			"spec", "envRefs", "PULUMI_PLUGIN_DOWNLOAD_URL_OVERRIDES"))
		if optOut {
			volumes, _, _ := unstructured.NestedSlice(s.Object, "spec", "workspaceTemplate", "spec", "podTemplate", "spec", "volumes")
			volumes = append(volumes, map[string]any{"name": "cache", "emptyDir": map[string]any{}})
			must(t, unstructured.SetNestedSlice(s.Object, volumes, "spec", "workspaceTemplate", "spec", "podTemplate", "spec", "volumes"))
		}
		if _, err := c.dyn.Resource(stackGVR).Namespace(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// deploy waits for the Stack to deploy commit, polling often enough
	// for the time it returns to be a measure.
	deploy := func(name, commit string) time.Duration {
		start := time.Now()
		done := succeededAt(commit)
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 6*time.Minute, true, func(ctx context.Context) (bool, error) {
			s, err := c.dyn.Resource(stackGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && done(s), nil
		})
		if err != nil {
			waitStackState(t, c, ns, name, time.Second, "a deployment of "+commit, done) // fails, showing the Stack
		}
		return time.Since(start)
	}

	// First deployments, one Stack after the other, so that neither
	// slows the other down: each fetches the provider.
	newStack("cached", false)
	first := deploy("cached", v1)
	if n := mirror.fetches.Load(); n != 1 {
		t.Fatalf("the first cached deployment fetched the provider %d times, want 1", n)
	}
	pod := workspacePod(t, c.cs, ns, "cached")
	checkEphemeralStorage(t, pod)
	var gocache []string
	for _, c := range pod.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == "GOCACHE" {
				gocache = append(gocache, c.Name+": "+e.Value)
			}
		}
	}
	if len(gocache) != 1 || gocache[0] != "pulumi: /cache/packages/go/build" {
		t.Errorf("GOCACHE %v, want the agent's at /cache/packages/go/build", gocache)
	}
	// The runtime made the claim, under a name the API server generated,
	// controlled by the Workspace and recorded on its StatefulSet.
	claim := cacheClaimOf(pod)
	if !strings.HasPrefix(claim, "cached-workspace-cache-") {
		t.Fatalf("the cached Stack's pod mounts the claim %q, want one the runtime made: %v", claim, pod.Spec.Volumes)
	}
	pvc, err := c.cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(pvc); ref == nil || ref.Kind != "Workspace" || ref.Name != "cached" {
		t.Errorf("the cache claim's controller is %+v, want Workspace cached", ref)
	}
	sts, err := c.cs.AppsV1().StatefulSets(ns).Get(ctx, "cached-workspace", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sts.Annotations["stackyard.dev/cache-claim"], claim+"/"+string(pvc.UID); got != want {
		t.Errorf("the StatefulSet records the cache claim %q, want %q", got, want)
	}
	step("cached: first deployment in %s, provider fetched once, claim %s mounted", first.Round(time.Second), claim)

	newStack("uncached", true)
	deploy("uncached", v1)
	if n := mirror.fetches.Load(); n != 2 {
		t.Fatalf("the opted-out Stack's first deployment left %d fetches, want 2", n)
	}
	if p := workspacePod(t, c.cs, ns, "uncached"); podHasClaims(p) {
		t.Fatalf("the opted-out Stack's pod mounts a claim: %v", p.Spec.Volumes)
	}
	step("uncached: first deployment, provider fetched again")

	// Both idle to zero pods; the cached Stack's claim stays.
	for _, name := range []string{"cached", "uncached"} {
		waitNoWorkspacePod(t, c, ns, name)
	}
	if _, err := c.cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{}); err != nil {
		t.Fatalf("the cache claim did not outlive the idle pod: %v", err)
	}
	step("both idle at zero pods; claim %s stays", claim)

	// Cold starts of a new commit.
	v2 := repo.Commit("main", map[string]string{"Pulumi.yaml": kubeprogram.ProjectAt("two", true, version)})
	times := map[string]time.Duration{}
	for _, name := range []string{"cached", "uncached"} {
		if _, err := c.dyn.Resource(stackGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType,
			fmt.Appendf(nil, `{"spec":{"commit":%q}}`, v2), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		before := mirror.fetches.Load()
		times[name] = deploy(name, v2)
		fetched := mirror.fetches.Load() - before
		switch {
		case name == "cached" && fetched != 0:
			t.Errorf("the cached Stack's cold start fetched the provider %d times, want none", fetched)
		case name == "uncached" && fetched != 1:
			t.Errorf("the opted-out Stack's cold start fetched the provider %d times, want 1", fetched)
		}
	}
	t.Logf("BENCHMARK cold update of the Kubernetes-provider program: with the cache %s, without %s (provider %d MB unpacked, %d MB fetched)",
		times["cached"].Round(100*time.Millisecond), times["uncached"].Round(100*time.Millisecond), mirror.unpacked>>20, mirror.size>>20)
	step("cold updates: cached %s, uncached %s", times["cached"].Round(time.Second), times["uncached"].Round(time.Second))

	// The Workspace goes with its Stack, and its claim with it.
	for _, name := range []string{"cached", "uncached"} {
		if err := c.dyn.Resource(stackGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("the cache claim %s should go with its Workspace: %v", claim, err)
	}
	step("deleted: the claim went with the Workspace")
	installed.uninstall(t)
	waitNoLeftovers(t, c, installed.objects)
}

// pluginMirror serves one plugin tarball the way Pulumi's plugin
// downloads expect it, counting the downloads.
type pluginMirror struct {
	url            string
	fetches        atomic.Int64
	size, unpacked int64
}

// servePluginMirror packs bin/pulumi-resource-kubernetes as the release
// tarball of version and serves it on the node's address.
func servePluginMirror(t *testing.T, version string) *pluginMirror {
	t.Helper()
	name := fmt.Sprintf("pulumi-resource-kubernetes-v%s-linux-amd64.tar.gz", version)
	tarball := filepath.Join(t.TempDir(), name)
	m := &pluginMirror{}
	m.unpacked, m.size = packPlugin(t, filepath.Join(repoRoot(t), "bin", "pulumi-resource-kubernetes"), tarball)
	ln, err := net.Listen("tcp", net.JoinHostPort(nodeIP(t), "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Logf("plugin mirror: %s %s", r.Method, r.URL.Path)
		if path.Base(r.URL.Path) != name {
			http.NotFound(w, r)
			return
		}
		if r.Method == http.MethodGet {
			m.fetches.Add(1)
		}
		http.ServeFile(w, r, tarball)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	m.url = "http://" + ln.Addr().String()
	return m
}

// packPlugin writes the plugin binary as a release tarball and returns
// its size unpacked and packed.
func packPlugin(t *testing.T, binary, tarball string) (unpacked, packed int64) {
	t.Helper()
	in, err := os.Open(binary)
	if err != nil {
		t.Fatalf("%v (make test-cluster builds it)", err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(tarball)
	if err != nil {
		t.Fatal(err)
	}
	gz, _ := gzip.NewWriterLevel(out, gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	must(t, tw.WriteHeader(&tar.Header{Name: filepath.Base(binary), Mode: 0o755, Size: fi.Size(), ModTime: fi.ModTime(), Typeflag: tar.TypeReg}))
	if _, err := io.Copy(tw, in); err != nil {
		t.Fatal(err)
	}
	must(t, tw.Close())
	must(t, gz.Close())
	must(t, out.Close())
	st, err := os.Stat(tarball)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size(), st.Size()
}

// providerVersion is the version bin/pulumi-resource-kubernetes reports:
// the module version tools/pulumi-kubernetes pins, without its v.
func providerVersion(t *testing.T) string {
	t.Helper()
	file := filepath.Join(repoRoot(t), "tools", "pulumi-kubernetes", "go.mod")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.Parse(file, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range mf.Require {
		if r.Mod.Path == "github.com/pulumi/pulumi-kubernetes/provider/v4" {
			return strings.TrimPrefix(r.Mod.Version, "v")
		}
	}
	t.Fatalf("%s requires no provider/v4", file)
	return ""
}

// checkEphemeralStorage checks that the workspace pod's containers carry
// config/manager's ephemeral-storage request and limit.
func checkEphemeralStorage(t *testing.T, pod corev1.Pod) {
	t.Helper()
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		req, lim := c.Resources.Requests[corev1.ResourceEphemeralStorage], c.Resources.Limits[corev1.ResourceEphemeralStorage]
		if req.String() != "1Gi" || lim.String() != "8Gi" {
			t.Errorf("container %s: ephemeral-storage request %s and limit %s, want 1Gi and 8Gi", c.Name, req.String(), lim.String())
		}
	}
}

// cacheClaimOf is the claim the pod mounts as its cache volume, or "".
func cacheClaimOf(pod corev1.Pod) string {
	for _, v := range pod.Spec.Volumes {
		if v.Name == "cache" && v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return ""
}

// podHasClaims reports whether the pod has any claim as a volume.
func podHasClaims(pod corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return true
		}
	}
	return false
}

// waitNoWorkspacePod waits for the Workspace ws to idle: no pod left.
func waitNoWorkspacePod(t *testing.T, c *cluster, ns, ws string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "auto.pulumi.com/workspace-name=" + ws})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("Workspace %s did not idle to zero pods: %v", ws, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
