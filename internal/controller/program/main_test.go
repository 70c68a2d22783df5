package program

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/artifact"
	"github.com/stackyard/stackyard/test/testenv"
)

// The control plane, artifact store and manager every test of the package
// shares: the Program controller runs against a real API server and
// publishes through a real artifact server on loopback.
var (
	env   *testenv.Env
	store *artifact.Store
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// run starts everything, runs the tests and stops everything again.
func run(m *testing.M) int {
	var err error
	env, err = testenv.Start(testenv.Options{AddToScheme: []func(*runtime.Scheme) error{pulumiv1.AddToScheme}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}()
	dir, err := os.MkdirTemp("", "program-artifacts-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	store, err = artifact.NewStore(dir, artifact.LocalURL(ln.Addr()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer store.Close()

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := mgr.Add(artifact.NewServer(store, ln, ctrl.Log.WithName("artifacts"))); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	r := &Reconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Store: store, Recorder: mgr.GetEventRecorder("program-controller")}
	if err := r.SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	return code
}
