//go:build cluster

// Package cluster_test checks the single-node test cluster that
// hack/cluster/up.sh starts (docs/cluster.md): a real kubelet, containerd and
// runc, so that a pod really runs. `make test-cluster` starts the cluster, runs
// these tests with -tags cluster and tears the cluster down; `make test` does
// not build them.
package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The smoke-test image and what its binary prints (hack/cluster/hello).
const (
	helloImage    = "stackyard.test/hello:1"
	helloGreeting = "hello from the stackyard test cluster"
)

func client(t *testing.T) kubernetes.Interface {
	t.Helper()
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		dir := os.Getenv("CLUSTER_DIR")
		if dir == "" {
			dir = "/tmp/stackyard-cluster"
		}
		path = filepath.Join(dir, "kubeconfig")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("kubeconfig %s (is the cluster up? hack/cluster/up.sh): %v", path, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestNodeReady(t *testing.T) {
	ctx := t.Context()
	nodes, err := client(t).CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 {
		t.Fatalf("want 1 node, got %d", len(nodes.Items))
	}
	node := nodes.Items[0]
	if !nodeReady(&node) {
		t.Fatalf("node %s is not Ready: %+v", node.Name, node.Status.Conditions)
	}
	t.Logf("node %s Ready: kubelet %s, runtime %s, kernel %s", node.Name,
		node.Status.NodeInfo.KubeletVersion, node.Status.NodeInfo.ContainerRuntimeVersion, node.Status.NodeInfo.KernelVersion)
}

func TestPodRunsToCompletion(t *testing.T) {
	cs := client(t)
	ns := namespace(t, cs)
	logs := runPod(t, cs, ns, "hello", helloImage, nil, []string{"one", "two"})
	for _, want := range []string{helloGreeting, "args: one two"} {
		if !strings.Contains(logs, want) {
			t.Errorf("pod log lacks %q:\n%s", want, logs)
		}
	}
}

// TestOperatorImage runs `stackyard version` (the image's entrypoint with the
// argument version) from the operator image when
// `make images` built it and up.sh imported it (dist/images/*.tar).
func TestOperatorImage(t *testing.T) {
	cs := client(t)
	image := nodeImage(t, cs, "ghcr.io/stackyard/stackyard:")
	if image == "" {
		t.Fatal("the operator image is not on the node (make images, then restart the cluster)")
	}
	ns := namespace(t, cs)
	logs := runPod(t, cs, ns, "stackyard-version", image, nil, []string{"version"})
	if strings.TrimSpace(logs) == "" {
		t.Fatalf("`stackyard version` printed nothing")
	}
	t.Logf("%s: %s", image, strings.TrimSpace(logs))
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodeImage returns the first image name on the node that starts with prefix.
func nodeImage(t *testing.T, cs kubernetes.Interface, prefix string) string {
	t.Helper()
	nodes, err := cs.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		for _, img := range n.Status.Images {
			for _, name := range img.Names {
				if strings.HasPrefix(name, prefix) && !strings.Contains(name, "@") {
					return name
				}
			}
		}
	}
	return ""
}

// namespace creates a namespace for one test and deletes it afterwards.
func namespace(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "cluster-test-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// runPod runs one container to completion (restartPolicy Never, image from
// the node only) and returns its log.
func runPod(t *testing.T, cs kubernetes.Interface, ns, name, image string, command, args []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name:            name,
				Image:           image,
				ImagePullPolicy: corev1.PullNever,
				Command:         command,
				Args:            args,
			}},
		},
	}
	// The namespace's default service account appears a moment after the
	// namespace; until then the ServiceAccount admission plugin refuses pods.
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil && (apierrors.IsForbidden(err) || apierrors.IsServerTimeout(err)) {
			t.Logf("create pod: %v (retrying)", err)
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}

	var last *corev1.Pod
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = p
		switch p.Status.Phase {
		case corev1.PodSucceeded:
			return true, nil
		case corev1.PodFailed:
			return false, fmt.Errorf("pod failed: %s", describe(p))
		}
		return false, nil
	})
	if err != nil {
		if last != nil {
			err = fmt.Errorf("%w; last status: %s", err, describe(last))
		}
		t.Fatalf("pod %s/%s did not succeed: %v", ns, name, err)
	}
	raw, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: name}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of %s/%s: %v", ns, name, err)
	}
	return string(raw)
}

func describe(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s", p.Status.Phase)
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			fmt.Fprintf(&b, "; %s=%s %s %s", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		switch {
		case s.State.Waiting != nil:
			fmt.Fprintf(&b, "; %s waiting: %s %s", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message)
		case s.State.Terminated != nil:
			fmt.Fprintf(&b, "; %s terminated: exit %d %s %s", s.Name, s.State.Terminated.ExitCode, s.State.Terminated.Reason, s.State.Terminated.Message)
		}
	}
	return b.String()
}

// TestServiceClusterIP dials the kubernetes Service's ClusterIP from a pod:
// kube-proxy (nftables mode) must forward it to the API server.
func TestServiceClusterIP(t *testing.T) {
	cs := client(t)
	svc, err := cs.CoreV1().Services("default").Get(t.Context(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns := namespace(t, cs)
	addr := svc.Spec.ClusterIP + ":443"
	logs := runPod(t, cs, ns, "dial-kubernetes", helloImage, nil, []string{"dial", addr})
	if !strings.Contains(logs, "dialed "+addr) {
		t.Fatalf("pod log lacks %q:\n%s", "dialed "+addr, logs)
	}
}

// TestClusterDNS resolves the kubernetes Service and a headless Service's
// name from a pod through CoreDNS, then dials the kubernetes Service by name.
func TestClusterDNS(t *testing.T) {
	cs := client(t)
	ns := namespace(t, cs)
	// A headless Service with one ready endpoint: the address a workspace
	// Service resolves to is its pod's; here an EndpointSlice stands in.
	_, err := cs.CoreV1().Services(ns).Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "headless"},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Ports:     []corev1.ServicePort{{Name: "p", Port: 80}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.DiscoveryV1().EndpointSlices(ns).Create(t.Context(), &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "headless-1", Labels: map[string]string{discoveryv1.LabelServiceName: "headless"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.88.255.254"}}},
		Ports:       []discoveryv1.EndpointPort{{Name: new("p"), Port: new(int32(80))}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"kubernetes.default.svc.cluster.local", "kubernetes.default", "headless." + ns + ".svc.cluster.local", "headless"}
	logs := runPod(t, cs, ns, "resolve", helloImage, nil, append([]string{"resolve"}, names...))
	for _, want := range []string{"resolved kubernetes.default.svc.cluster.local 10.96.0.1", "resolved headless 10.88.255.254"} {
		if !strings.Contains(logs, want) {
			t.Errorf("pod log lacks %q:\n%s", want, logs)
		}
	}
	logs = runPod(t, cs, ns, "dial-by-name", helloImage, nil, []string{"dial", "kubernetes.default.svc:443"})
	if !strings.Contains(logs, "dialed kubernetes.default.svc:443") {
		t.Errorf("pod log lacks the dial:\n%s", logs)
	}
}
