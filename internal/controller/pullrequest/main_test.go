package pullrequest_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/operator"
	"github.com/stackyard/stackyard/test/testenv"
)

// The whole operator runs against the real API server as its
// ServiceAccount, bound to the generated RBAC only, with the admission
// policies applied, the real pulumi CLI, YAML host and test provider, and
// Gitea as the forge (test/forge): its pull requests, comments, commit
// statuses and the webhooks that tell the operator of them are real.
var (
	env *testenv.Env
	// logs holds everything the operator logged; STACKYARD_TEST_LOG=1
	// also prints it.
	logs testenv.SyncBuffer
	// receiverURL is the operator's receiver endpoint, where Gitea
	// delivers its pull request events.
	receiverURL string
)

const passphrase = "passphrase-of-the-pull-request-suite-7e21"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	required := append([]string{"etcd", "kube-apiserver", "gitea"}, testenv.PulumiBinaries...)
	if err := testenv.RequireBinaries(required...); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "pullrequest-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	if err := testenv.IsolatePulumi(tmp, passphrase); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	agentBin, err := testenv.BuildStackyard(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var out io.Writer = &logs
	if os.Getenv("STACKYARD_TEST_LOG") != "" {
		out = io.MultiWriter(&logs, os.Stderr)
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(out), zap.Level(zapcore.Level(-4))))
	env, err = testenv.Start(testenv.Options{
		AddToScheme: []func(*k8sruntime.Scheme) error{
			pulumiv1.AddToScheme, autov1alpha1.AddToScheme, promotionv1alpha1.AddToScheme, notificationv1alpha1.AddToScheme,
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	if err := env.InstallPolicies(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	cfg, err := env.ServiceAccountConfig(context.Background(), "stackyard-system", "stackyard", testenv.OperatorRoles()...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	receiverURL = "http://" + addr
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	op, err := operator.New(ctx, cfg, operator.Options{
		Runtime:      operator.RuntimeLocal,
		StateDir:     filepath.Join(tmp, "operator"),
		AgentPath:    agentBin,
		ToolDirs:     []string{testenv.BinDir()},
		AgentEnv:     map[string]string{"PULUMI_CONFIG_PASSPHRASE": passphrase},
		IdleAfter:    5 * time.Second,
		DashboardURL: dashboardURL,
		ReceiverAddr: addr,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: assembling the operator: %v\n", err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- op.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "operator stopped:", err)
		return 1
	}
	return code
}
