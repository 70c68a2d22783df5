package kubernetes

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/readset"
	"github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/runtime"
	"github.com/stackyard/stackyard/internal/source"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// createWorkspace stores a Workspace, so that owner references have a UID.
func createWorkspace(t *testing.T, ns string, mutate func(*autov1alpha1.Workspace)) *autov1alpha1.Workspace {
	t.Helper()
	ws := baseWorkspace()
	ws.Namespace = ns
	if mutate != nil {
		mutate(ws)
	}
	if err := testEnv(t).Client.Create(ctx(t), ws); err != nil {
		t.Fatal(err)
	}
	return ws
}

func newTestRuntime(t *testing.T, ns string) *Runtime {
	t.Helper()
	e := testEnv(t)
	rt, err := New(Options{Client: e.Client, Scheme: e.Scheme, Build: testBuild,
		ServiceAccount: types.NamespacedName{Namespace: ns, Name: "operator"}})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// getSTS reads the Workspace's StatefulSet.
func getSTS(t *testing.T, ws *autov1alpha1.Workspace) *appsv1.StatefulSet {
	t.Helper()
	var sts appsv1.StatefulSet
	if err := testEnv(t).Client.Get(ctx(t), types.NamespacedName{Namespace: ws.Namespace, Name: ObjectName(ws)}, &sts); err != nil {
		t.Fatal(err)
	}
	return &sts
}

// ownedBy fails unless obj's controller is ws.
func ownedBy(t *testing.T, obj metav1.Object, ws *autov1alpha1.Workspace) {
	t.Helper()
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.UID != ws.UID || ref.Kind != "Workspace" {
		t.Errorf("%s: controller = %+v, want Workspace %s", obj.GetName(), ref, ws.Name)
	}
}

func TestEnsureAndIdle(t *testing.T) {
	ns := newNamespace(t)
	rt := newTestRuntime(t, ns)
	c := testEnv(t).Client
	ws := createWorkspace(t, ns, func(ws *autov1alpha1.Workspace) {
		ws.Spec.PodTemplate = &autov1alpha1.EmbeddedPodTemplateSpec{Spec: &corev1.PodSpec{
			NodeSelector: map[string]string{"pool": "ops"},
			Containers:   []corev1.Container{{Name: ContainerName, Env: []corev1.EnvVar{{Name: "FROM_TEMPLATE", Value: "1"}}}},
		}}
	})

	st, err := rt.Ensure(ctx(t), ws)
	if err != nil || st.Ready || !strings.Contains(st.Message, "create its pod") {
		t.Fatalf("Ensure = %+v, %v; want not ready, waiting for the pod", st, err)
	}
	sts := getSTS(t, ws)
	ownedBy(t, sts, ws)
	pod := sts.Spec.Template.Spec
	main := container(t, &pod, ContainerName)
	if *sts.Spec.Replicas != 1 || pod.NodeSelector["pool"] != "ops" || main.Env[len(main.Env)-1].Name != "FROM_TEMPLATE" {
		t.Errorf("stored StatefulSet: replicas %d, node selector %v, env %v", *sts.Spec.Replicas, pod.NodeSelector, main.Env)
	}
	if !ptr.Deref(pod.SecurityContext.RunAsNonRoot, false) || ptr.Deref(main.SecurityContext.AllowPrivilegeEscalation, true) ||
		main.Image != DefaultImage || main.ReadinessProbe.TCPSocket == nil {
		t.Errorf("stored pod: security %+v / %+v, image %s", pod.SecurityContext, main.SecurityContext, main.Image)
	}
	var svc corev1.Service
	if err := c.Get(ctx(t), types.NamespacedName{Namespace: ns, Name: ObjectName(ws)}, &svc); err != nil {
		t.Fatal(err)
	}
	ownedBy(t, &svc, ws)
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Spec.Selector[WorkspaceNameLabel] != ws.Name {
		t.Errorf("service spec = %+v", svc.Spec)
	}

	// Applying again changes nothing, and keeps what others added.
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"someone":"else"}}}`))
	if err := c.Patch(ctx(t), sts, patch); err != nil {
		t.Fatal(err)
	}
	gen := getSTS(t, ws).Generation
	if _, err := rt.Ensure(ctx(t), ws); err != nil {
		t.Fatal(err)
	}
	if again := getSTS(t, ws); again.Generation != gen || again.Annotations["someone"] != "else" {
		t.Errorf("second Ensure: generation %d -> %d, annotations %v", gen, again.Generation, again.Annotations)
	}

	// Idle scales to zero, Ensure back to one.
	if err := rt.Idle(ctx(t), ws); err != nil {
		t.Fatal(err)
	}
	if r := *getSTS(t, ws).Spec.Replicas; r != 0 {
		t.Fatalf("replicas after Idle = %d", r)
	}
	if _, err := rt.Ensure(ctx(t), ws); err != nil {
		t.Fatal(err)
	}
	sts = getSTS(t, ws)
	if *sts.Spec.Replicas != 1 {
		t.Fatalf("replicas after Ensure = %d", *sts.Spec.Replicas)
	}

	// There is no kubelet: play the StatefulSet controller and the kubelet.
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: 1, ReadyReplicas: 1,
		UpdatedReplicas: 1, CurrentRevision: "rev1", UpdateRevision: "rev1"}
	if err := c.Status().Update(ctx(t), sts); err != nil {
		t.Fatal(err)
	}
	p := createPod(t, ws, "rev1")
	if st, err := rt.Ensure(ctx(t), ws); err != nil || st.Ready {
		t.Fatalf("Ensure with an unready pod = %+v, %v; want not ready", st, err)
	}
	setPodStatus(t, p, true, &corev1.ContainerStateTerminated{ExitCode: 0, Message: `{"revision":"abc123"}`})
	st, err = rt.Ensure(ctx(t), ws)
	want := runtime.Status{Ready: true, Address: ObjectName(ws) + "." + ns + ":50051", Revision: "abc123", Instance: string(p.UID)}
	if err != nil || st != want {
		t.Fatalf("Ensure with a ready pod = %+v, %v; want %+v", st, err, want)
	}
}

// createPod stores the Workspace's pod as the StatefulSet controller would.
func createPod(t *testing.T, ws *autov1alpha1.Workspace, revision string) *corev1.Pod {
	t.Helper()
	labels := Labels(ws)
	labels[appsv1.ControllerRevisionHashLabelKey] = revision
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: ObjectName(ws) + "-0", Namespace: ws.Namespace, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: ContainerName, Image: DefaultImage}}},
	}
	if err := testEnv(t).Client.Create(ctx(t), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// setPodStatus writes the pod's Ready condition and init container state.
func setPodStatus(t *testing.T, p *corev1.Pod, ready bool, init *corev1.ContainerStateTerminated) {
	t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: InitContainerName, Image: "x", ImageID: "x", State: corev1.ContainerState{Terminated: init}}}
	if err := testEnv(t).Client.Status().Update(ctx(t), p); err != nil {
		t.Fatal(err)
	}
}

func TestFetchFailures(t *testing.T) {
	ns := newNamespace(t)
	rt := newTestRuntime(t, ns)
	ws := createWorkspace(t, ns, nil)
	if _, err := rt.Ensure(ctx(t), ws); err != nil {
		t.Fatal(err)
	}
	p := createPod(t, ws, "")

	// A transient failure: the kubelet retries; the message says why.
	transient := source.Report{Reason: source.ReasonUnreachable, Message: "connection refused"}
	setPodStatus(t, p, false, &corev1.ContainerStateTerminated{ExitCode: 1, Message: reportJSON(t, transient)})
	st, err := rt.Ensure(ctx(t), ws)
	if err != nil || st.Ready || !strings.Contains(st.Message, "connection refused") {
		t.Fatalf("Ensure = %+v, %v; want waiting with the fetch error", st, err)
	}

	// A permanent one stalls the Workspace, naming the field.
	permanent := source.Report{Reason: source.ReasonAuthFailed, Permanent: true, Field: source.FieldAuth, Message: "authentication failed"}
	setPodStatus(t, p, false, &corev1.ContainerStateTerminated{ExitCode: 1, Message: reportJSON(t, permanent)})
	_, err = rt.Ensure(ctx(t), ws)
	var stalling *reconcile.Stalling
	if !errors.As(err, &stalling) || stalling.Reason != autov1alpha1.WorkspaceReasonSourceFailed || !strings.Contains(err.Error(), "spec.git.auth") {
		t.Fatalf("Ensure = %v; want Stalling SourceFailed naming spec.git.auth", err)
	}

	// A pod stuck at an old revision is replaced.
	sts := getSTS(t, ws)
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: 1, CurrentRevision: "old", UpdateRevision: "new"}
	if err := testEnv(t).Client.Status().Update(ctx(t), sts); err != nil {
		t.Fatal(err)
	}
	st, err = rt.Ensure(ctx(t), ws)
	if err != nil || st.Ready || !strings.Contains(st.Message, "replacing pod") {
		t.Fatalf("Ensure = %+v, %v; want the stale pod replaced", st, err)
	}
	err = testEnv(t).Client.Get(ctx(t), client.ObjectKeyFromObject(p), &corev1.Pod{})
	if !apierrors.IsNotFound(err) {
		// Without a kubelet a deleted pod may linger with a deletion
		// timestamp only if it has finalizers; it has none.
		t.Errorf("stale pod still there: %v", err)
	}
}

func reportJSON(t *testing.T, r source.Report) string {
	t.Helper()
	path := t.TempDir() + "/report"
	if err := r.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestIdleWithoutStatefulSet(t *testing.T) {
	ns := newNamespace(t)
	rt := newTestRuntime(t, ns)
	// Nothing to scale yet, and a spec that cannot be built: Idle is a no-op.
	ws := createWorkspace(t, ns, func(ws *autov1alpha1.Workspace) {
		ws.Spec.PodTemplate = &autov1alpha1.EmbeddedPodTemplateSpec{Spec: &corev1.PodSpec{Containers: []corev1.Container{{Image: "x"}}}}
	})
	if err := rt.Idle(ctx(t), ws); err != nil {
		t.Fatalf("Idle: %v", err)
	}
	if _, err := rt.Ensure(ctx(t), ws); err == nil {
		t.Fatal("Ensure built an invalid pod template")
	}
	err := testEnv(t).Client.Get(ctx(t), types.NamespacedName{Namespace: ns, Name: ObjectName(ws)}, &appsv1.StatefulSet{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("StatefulSet of an unbuildable workspace: %v", err)
	}
}

// TestCacheClaimMadeAndRecorded: with the cache on, the runtime makes the
// Workspace's claim itself, under a name the API server generates,
// controlled by the Workspace, and records its name and UID on the
// StatefulSet; the agent's pod mounts exactly that claim. A claim planted
// first under the name the StatefulSet controller would once have used is
// never mounted; one made in place of the recorded claim (deleted, then
// made again under its name) is not taken for it: a new claim is made,
// and the Workspace's claims nobody records are deleted.
func TestCacheClaimMadeAndRecorded(t *testing.T) {
	ns := newNamespace(t)
	rt := newTestRuntime(t, ns)
	c := testEnv(t).Client
	ws := createWorkspace(t, ns, nil)
	if _, err := rt.Ensure(ctx(t), ws); err != nil {
		t.Fatal(err)
	}
	if v := ownCacheVolume(getSTS(t, ws)); v != nil || getSTS(t, ws).Annotations[CacheClaimAnnotation] != "" {
		t.Fatalf("a cache claim without a cache: %v", v)
	}
	legacy := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: CacheVolume + "-" + ObjectName(ws) + "-0"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := c.Create(ctx(t), legacy); err != nil {
		t.Fatal(err)
	}

	// mounted runs Ensure and returns the claim the pod mounts, checking
	// that the StatefulSet records it and the Workspace controls it.
	mounted := func() *corev1.PersistentVolumeClaim {
		t.Helper()
		if _, err := rt.Ensure(ctx(t), ws); err != nil {
			t.Fatal(err)
		}
		sts := getSTS(t, ws)
		var name string
		for _, v := range sts.Spec.Template.Spec.Volumes {
			if v.Name == CacheVolume && v.PersistentVolumeClaim != nil {
				name = v.PersistentVolumeClaim.ClaimName
			}
		}
		var claim corev1.PersistentVolumeClaim
		if err := c.Get(ctx(t), types.NamespacedName{Namespace: ns, Name: name}, &claim); err != nil {
			t.Fatalf("the mounted claim %q: %v", name, err)
		}
		ownedBy(t, &claim, ws)
		if got, want := sts.Annotations[CacheClaimAnnotation], claimRecord(claim.Name, claim.UID); got != want {
			t.Errorf("%s = %q, want %q", CacheClaimAnnotation, got, want)
		}
		return &claim
	}
	rt.opts.Build.Cache = CacheOptions{Size: resource.MustParse("1Gi")}
	first := mounted()
	if !strings.HasPrefix(first.Name, ObjectName(ws)+"-cache-") || first.Name == legacy.Name {
		t.Fatalf("the claim is %s, want one named by the API server after %s-cache-", first.Name, ObjectName(ws))
	}
	if again := mounted(); again.UID != first.UID {
		t.Fatalf("a second Ensure made another claim: %s", again.Name)
	}

	// The recorded claim deleted (the claim protection lets go at once
	// here, as nothing mounts it) and made again under its name, claiming
	// the Workspace: not taken for it.
	unprotect := func(pvc *corev1.PersistentVolumeClaim) {
		t.Helper()
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
		if err := c.Patch(ctx(t), pvc, patch); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	if err := c.Delete(ctx(t), first); err != nil {
		t.Fatal(err)
	}
	unprotect(first)
	planted := legacy.DeepCopy()
	planted.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: first.Name, Labels: first.Labels, OwnerReferences: first.OwnerReferences}
	if err := c.Create(ctx(t), planted); err != nil {
		t.Fatal(err)
	}
	// And a claim an Ensure stopped before its record would leave.
	orphan := cacheClaim(ws, rt.opts.Build.Cache)
	orphan.OwnerReferences = first.OwnerReferences
	if err := c.Create(ctx(t), orphan); err != nil {
		t.Fatal(err)
	}
	second := mounted()
	if second.Name == first.Name || second.UID == planted.UID || second.UID == orphan.UID {
		t.Fatalf("the claim made in place of the recorded one, or an unrecorded one, was taken: %s", second.Name)
	}
	for _, pvc := range []*corev1.PersistentVolumeClaim{planted, orphan} {
		var left corev1.PersistentVolumeClaim
		err := c.Get(ctx(t), client.ObjectKeyFromObject(pvc), &left)
		if err == nil && left.DeletionTimestamp.IsZero() {
			t.Errorf("claim %s, controlled by the Workspace but not recorded, was not deleted", pvc.Name)
		}
	}
	var kept corev1.PersistentVolumeClaim
	if err := c.Get(ctx(t), client.ObjectKeyFromObject(legacy), &kept); err != nil || !kept.DeletionTimestamp.IsZero() {
		t.Errorf("the claim nobody claimed for the Workspace was touched: %v", err)
	}
}

// TestEnsureStampsReads: the agent container is told which versions of the
// Secrets and ConfigMaps its environment names it starts with, read live
// (an absent optional one as no version), and a write changes the pod
// template, so that the pod is replaced and the agent told anew.
func TestEnsureStampsReads(t *testing.T) {
	ns := newNamespace(t)
	rt := newTestRuntime(t, ns)
	c := testEnv(t).Client
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, StringData: map[string]string{"token": "t1"}}
	if err := c.Create(ctx(t), creds); err != nil {
		t.Fatal(err)
	}
	ws := createWorkspace(t, ns, func(ws *autov1alpha1.Workspace) {
		ws.Spec.Env = append(ws.Spec.Env, corev1.EnvVar{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "token"}}})
		ws.Spec.EnvFrom = append(ws.Spec.EnvFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Optional: ptr.To(true)}})
	})
	stamped := func() string {
		t.Helper()
		if _, err := rt.Ensure(ctx(t), ws); err != nil {
			t.Fatal(err)
		}
		spec := getSTS(t, ws).Spec.Template.Spec
		for _, e := range container(t, &spec, ContainerName).Env {
			if e.Name == readset.EnvVar {
				return e.Value
			}
		}
		t.Fatalf("the agent container has no %s", readset.EnvVar)
		return ""
	}
	if got, want := stamped(), "ConfigMap/absent=;Secret/creds="+creds.ResourceVersion; got != want {
		t.Fatalf("%s = %q, want %q", readset.EnvVar, got, want)
	}
	creds.StringData = map[string]string{"token": "t2"}
	if err := c.Update(ctx(t), creds); err != nil {
		t.Fatal(err)
	}
	if got, want := stamped(), "ConfigMap/absent=;Secret/creds="+creds.ResourceVersion; got != want {
		t.Fatalf("after a write, %s = %q, want %q", readset.EnvVar, got, want)
	}
}
