package local_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/runtime/local"
	"github.com/stackyard/stackyard/test/testenv"
)

// Set up once by TestMain.
var (
	stackyardBin string // `stackyard` built from this tree
	scratch      string // removed after the tests

	envOnce sync.Once
	env     *testenv.Env
	envErr  error
)

// TestMain checks the pinned tools, isolates git and Pulumi from the
// machine and builds the stackyard binary once; the control plane starts
// with the first test that needs it.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if err := testenv.RequireBinaries("pulumi", "pulumi-language-yaml", "etcd", "kube-apiserver"); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	for k, v := range map[string]string{
		"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
		"PULUMI_ACCESS_TOKEN": "", "PULUMI_BACKEND_URL": "", "PULUMI_CONFIG_PASSPHRASE": "",
	} {
		_ = os.Setenv(k, v)
	}
	var err error
	if scratch, err = os.MkdirTemp("", "local-runtime-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(scratch)
	if stackyardBin, err = testenv.BuildStackyard(scratch); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	code := m.Run()
	if env != nil {
		_ = env.Stop()
	}
	return code
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

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := testEnv(t).NewNamespace(t, "local-")
	t.Cleanup(func() {
		_ = testEnv(t).Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	return ns
}

// newRuntime returns a runtime over root (a fresh directory when empty)
// whose agents are stopped when the test ends; exits are reported on the
// returned channel.
func newRuntime(t *testing.T, root string, opts ...func(*local.Options)) (*local.Runtime, chan string) {
	t.Helper()
	if root == "" {
		root = t.TempDir()
	}
	exits := make(chan string, 16)
	o := local.Options{
		Root:            root,
		Client:          testEnv(t).Client,
		AgentPath:       stackyardBin,
		PathDirs:        []string{testenv.BinDir()},
		Env:             map[string]string{"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true"},
		StopGracePeriod: 5 * time.Second,
		OnExit:          func(key types.NamespacedName) { exits <- key.String() },
		Log: funcr.New(func(prefix, args string) { t.Log(prefix, args) },
			funcr.Options{Verbosity: 1}),
	}
	for _, opt := range opts {
		opt(&o)
	}
	rt, err := local.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	return rt, exits
}

// ctx returns a context bounded so that a hang fails the test.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// waitGone waits until pid no longer runs (or is a zombie).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil || isZombie(pid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("process %d still runs", pid)
}

// isZombie reports whether pid has exited but not been reaped.
func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' && i+2 < len(b) {
			return b[i+2] == 'Z'
		}
	}
	return false
}
