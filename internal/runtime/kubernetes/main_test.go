package kubernetes

import (
	"context"
	"os"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/test/testenv"
)

// Set up on first use and torn down by TestMain; the builder tests need
// neither.
var (
	envOnce sync.Once
	env     *testenv.Env
	envErr  error

	binOnce sync.Once
	binPath string
	binErr  error
	scratch string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		_ = env.Stop()
	}
	if scratch != "" {
		_ = os.RemoveAll(scratch)
	}
	os.Exit(code)
}

// testEnv returns the shared control plane, starting it on first use.
func testEnv(t *testing.T) *testenv.Env {
	t.Helper()
	envOnce.Do(func() {
		env, envErr = testenv.Start(testenv.Options{AddToScheme: []func(*k8sruntime.Scheme) error{autov1alpha1.AddToScheme}})
	})
	if envErr != nil {
		t.Fatalf("starting the control plane: %v", envErr)
	}
	return env
}

// stackyard builds the stackyard binary once.
func stackyard(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binErr = testenv.RequireBinaries("pulumi"); binErr != nil {
			return
		}
		if scratch, binErr = os.MkdirTemp("", "kubernetes-runtime-test-"); binErr != nil {
			return
		}
		binPath, binErr = testenv.BuildStackyard(scratch)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := testEnv(t).NewNamespace(t, "k8srt-")
	t.Cleanup(func() {
		_ = testEnv(t).Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	return ns
}
