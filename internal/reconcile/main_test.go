package reconcile

import (
	"context"
	"os"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackyard/stackyard/test/testenv"
)

// The control plane is started by the first test that needs it, so the unit
// tests of this package do not wait for etcd and kube-apiserver.
var (
	envOnce sync.Once
	env     *testenv.Env
	envErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		_ = env.Stop()
	}
	os.Exit(code)
}

// testEnv returns the shared control plane, starting it on first use.
func testEnv(t *testing.T) *testenv.Env {
	t.Helper()
	envOnce.Do(func() { env, envErr = testenv.Start(testenv.Options{}) })
	if envErr != nil {
		t.Fatalf("starting the control plane: %v", envErr)
	}
	return env
}

// testNamespace creates a namespace of its own for one test, with the
// default service account pods need (there is no controller-manager to
// create it), and deletes it when the test ends.
func testNamespace(t *testing.T, e *testenv.Env) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "reconcile-"}}
	if err := e.Client.Create(ctx, ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), ns) })
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns.Name}}
	if err := e.Client.Create(ctx, sa); err != nil {
		t.Fatalf("creating the default service account: %v", err)
	}
	return ns.Name
}
