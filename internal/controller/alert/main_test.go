package alert_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/controller/alert"
	"github.com/stackyard/stackyard/internal/metrics"
	"github.com/stackyard/stackyard/internal/notify"
	"github.com/stackyard/stackyard/internal/operator"
	"github.com/stackyard/stackyard/test/testenv"
)

// The Alert controller runs against the real API server as the
// operator's ServiceAccount, bound to the generated RBAC only. The other
// controllers do not run: the tests write the Promotions' status by hand
// (as the cluster-admin test client, which holds the verb "record"), and
// the promotion controller would otherwise end Promotions whose Stacks do
// not exist before the test could.
var (
	env  *testenv.Env
	logs testenv.SyncBuffer
	// counts is the controller's delivery metric.
	counts = metrics.NewNotifications()
)

// dashboardURL is the dashboard address the controller links to.
const dashboardURL = "https://stackyard.example.com"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if err := testenv.RequireBinaries("etcd", "kube-apiserver"); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	var out io.Writer = &logs
	if os.Getenv("STACKYARD_TEST_LOG") != "" {
		out = io.MultiWriter(&logs, os.Stderr)
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(out), zap.Level(zapcore.Level(-2))))
	var err error
	env, err = testenv.Start(testenv.Options{
		AddToScheme: []func(*k8sruntime.Scheme) error{
			pulumiv1.AddToScheme, promotionv1alpha1.AddToScheme, notificationv1alpha1.AddToScheme,
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, err := env.ServiceAccountConfig(ctx, "stackyard-system", "stackyard", testenv.OperatorRoles()...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	scheme, err := operator.Scheme()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	r := &alert.Reconciler{Client: mgr.GetClient(), Secrets: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Sender: notify.NewSender(), DashboardURL: dashboardURL, Metrics: counts}
	if err := r.SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager stopped:", err)
		return 1
	}
	return code
}
