package workspace_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/controller/workspace"
	"github.com/stackyard/stackyard/internal/runtime/kubernetes"
	"github.com/stackyard/stackyard/test/testenv"
)

// TestKubernetesRuntime runs the controller over the kubernetes runtime.
// No kubelet runs here, so it checks what the controller makes of the
// runtime: the StatefulSet and Service exist, owned by the Workspace, and
// the Workspace waits (Ready=False Pending, Active=False Starting) while
// no pod is ready; an idle period is not applied to a Workspace that was
// never set up.
func TestKubernetesRuntime(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	// The controller acts as the operator's ServiceAccount, with only the
	// generated ClusterRole: the runtime's RBAC rules are checked too.
	cfg, err := env.ServiceAccountConfig(ctx(t), "stackyard-system", "stackyard", testenv.OperatorRoles()...)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller:             config.Controller{SkipNameValidation: ptrTo(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := kubernetes.New(kubernetes.Options{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
		Build:          kubernetes.BuildOptions{InitImage: "ghcr.io/stackyard/stackyard:test"},
		ServiceAccount: types.NamespacedName{Namespace: ns, Name: "operator"},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &workspace.Reconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Runtime: rt, Recorder: mgr.GetEventRecorder("workspace-controller"),
		Options: workspace.Options{IdleAfter: time.Second, StartInterval: 500 * time.Millisecond, Owns: []client.Object{&appsv1.StatefulSet{}}}}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = mgr.Start(c) }()
	t.Cleanup(func() { cancel(); wg.Wait() })

	ws := &autov1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: "pod", Namespace: ns},
		Spec: autov1alpha1.WorkspaceSpec{
			Git:    &autov1alpha1.GitSource{URL: "https://git.example.com/org/repo.git", Ref: "main"},
			Stacks: []autov1alpha1.WorkspaceStack{{Name: "dev", Create: ptrTo(true)}},
		},
	}
	if err := env.Client.Create(ctx(t), ws); err != nil {
		t.Fatal(err)
	}
	var sts appsv1.StatefulSet
	eventually(t, 30*time.Second, "the StatefulSet", func() (bool, string) {
		err := env.Client.Get(ctx(t), types.NamespacedName{Namespace: ns, Name: "pod-workspace"}, &sts)
		return err == nil, fmt.Sprint(err)
	})
	var svc corev1.Service
	if err := env.Client.Get(ctx(t), types.NamespacedName{Namespace: ns, Name: "pod-workspace"}, &svc); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []metav1.Object{&sts, &svc} {
		if ref := metav1.GetControllerOf(obj); ref == nil || ref.Name != ws.Name {
			t.Errorf("%s is not owned by the workspace: %v", obj.GetName(), ref)
		}
	}
	if *sts.Spec.Replicas != 1 {
		t.Errorf("replicas = %d", *sts.Spec.Replicas)
	}

	got := waitCondition(t, ns, ws.Name, autov1alpha1.WorkspaceActive, metav1.ConditionFalse, workspace.ReasonStarting)
	ready := findCondition(got, autov1alpha1.WorkspaceReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != autov1alpha1.WorkspaceReasonPending || got.Serving() {
		t.Errorf("workspace without a ready pod: %s", describe(got))
	}
	// Past IdleAfter (one second here), a Workspace never set up is still
	// not idled. A negative check, which no event can end (the controller
	// says when it idles, not each time it does not): a controller that
	// wrongly idled would scale the StatefulSet down once IdleAfter has
	// passed, so a fixed wait of twice IdleAfter catches it.
	time.Sleep(2 * time.Second)
	if err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(&sts), &sts); err != nil || *sts.Spec.Replicas != 1 {
		t.Errorf("replicas = %d, %v; want 1 until the workspace is set up", *sts.Spec.Replicas, err)
	}
}
