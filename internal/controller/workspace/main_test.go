package workspace_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/controller/workspace"
	"github.com/stackyard/stackyard/internal/runtime/local"
	"github.com/stackyard/stackyard/test/testenv"
)

// Shared by every test, set up by TestMain.
var (
	env          *testenv.Env
	stackyardBin string
)

// TestMain checks the tools, isolates git and Pulumi from the machine,
// builds the stackyard binary once and starts one control plane.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrl.SetLogger(logr.Discard())
	if err := testenv.RequireBinaries("etcd", "kube-apiserver", "pulumi", "pulumi-language-yaml", "pulumi-resource-stackyardtest"); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	for k, v := range map[string]string{
		"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
		"PULUMI_ACCESS_TOKEN": "", "PULUMI_BACKEND_URL": "", "PULUMI_CONFIG_PASSPHRASE": "",
	} {
		_ = os.Setenv(k, v)
	}
	scratch, err := os.MkdirTemp("", "workspace-controller-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(scratch)
	if stackyardBin, err = testenv.BuildStackyard(scratch); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	env, err = testenv.Start(testenv.Options{AddToScheme: []func(*k8sruntime.Scheme) error{autov1alpha1.AddToScheme, pulumiv1.AddToScheme}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	defer env.Stop()
	return m.Run()
}

// operator is a running manager with the Workspace controller over a local
// runtime, watching one namespace.
type operator struct {
	rt   *local.Runtime
	logs *testenv.SyncBuffer
	stop func()
}

// startOperator starts a manager for namespace ns with a local runtime
// over root. It is stopped when the test ends, or earlier by stop.
func startOperator(t *testing.T, ns, root string, opts workspace.Options, rtOpts ...func(*local.Options)) *operator {
	t.Helper()
	logs := &testenv.SyncBuffer{}
	logger := funcr.New(func(prefix, args string) { fmt.Fprintln(logs, prefix, args) }, funcr.Options{Verbosity: 1})
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Logger:                 logger,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller:             config.Controller{SkipNameValidation: ptrTo(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	events, notify := workspace.NotifyChannel()
	rtOptions := local.Options{
		Root:            root,
		Client:          mgr.GetAPIReader(),
		AgentPath:       stackyardBin,
		PathDirs:        []string{testenv.BinDir()},
		Env:             map[string]string{"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true"},
		StopGracePeriod: 10 * time.Second,
		OnExit:          notify,
		Log:             logger.WithName("local-runtime"),
	}
	for _, opt := range rtOpts {
		opt(&rtOptions)
	}
	rt, err := local.New(rtOptions)
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(rt); err != nil {
		t.Fatal(err)
	}
	opts.RuntimeEvents = events
	if opts.StartInterval == 0 {
		opts.StartInterval = 500 * time.Millisecond
	}
	r := &workspace.Reconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Runtime: rt, Recorder: mgr.GetEventRecorder("workspace-controller"), Options: opts}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	op := &operator{rt: rt, logs: logs}
	op.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(func() {
		op.stop()
		if t.Failed() {
			t.Logf("operator log:\n%s", logs.String())
		}
	})
	return op
}

func ptrTo[T any](v T) *T { return &v }

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := env.NewNamespace(t, "ws-")
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	return ns
}

// ctx returns a context bounded so a hang fails the test.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// eventually polls cond every 100ms until it holds, failing after d with
// the last description cond gave.
func eventually(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	var last string
	for {
		ok, desc := cond()
		if ok {
			return
		}
		last = desc
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", d, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// alive reports whether pid runs (and is not a zombie).
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z'
}

// mustNotContain fails if text contains any of the secrets.
func mustNotContain(t *testing.T, where, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("%s leaks a secret value", where)
		}
	}
}
