// Package hostile feeds malformed and hostile objects of every kind
// stackyard serves to the real API server, with the admission policies
// installed and the operator running: each must be refused at admission
// with a message that names the field, or be accepted and then settle
// (Stalled with a reason, Failed, or Ready when the value is harmless),
// and none may make the operator panic, run a shell command smuggled in a
// string, or read outside its source.
package hostile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/operator"
	"github.com/stackyard/stackyard/test/testenv"
)

var (
	env  *testenv.Env
	logs = &testenv.SyncBuffer{}
	// markDir is where a smuggled shell command would leave its mark.
	markDir string
)

const passphrase = "passphrase-of-the-hostile-suite"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if err := testenv.RequireBinaries(append([]string{"etcd", "kube-apiserver"}, testenv.PulumiBinaries...)...); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "hostile-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	markDir = filepath.Join(tmp, "marks")
	if err := os.MkdirAll(markDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := testenv.IsolatePulumi(tmp, passphrase); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	agentBin, err := testenv.BuildStackyard(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logs)))
	env, err = testenv.Start(testenv.Options{AddToScheme: []func(*k8sruntime.Scheme) error{
		pulumiv1.AddToScheme, autov1alpha1.AddToScheme, promotionv1alpha1.AddToScheme,
	}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := env.InstallPolicies(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	cfg, err := env.ServiceAccountConfig(ctx, "stackyard-system", "stackyard", testenv.OperatorRoles()...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	op, err := operator.New(ctx, cfg, operator.Options{
		Runtime: operator.RuntimeLocal, StateDir: filepath.Join(tmp, "operator"), AgentPath: agentBin,
		ToolDirs: []string{testenv.BinDir()}, AgentEnv: map[string]string{"PULUMI_CONFIG_PASSPHRASE": passphrase},
		MetricsAddr: "0", ProbeAddr: "0", IdleAfter: 5 * time.Second, MinResync: time.Second, StallAfter: 3 * time.Second,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	stopped := make(chan error, 1)
	go func() { stopped <- op.Start(ctx) }()
	code := m.Run()
	select {
	case err := <-stopped:
		fmt.Fprintf(os.Stderr, "FAIL: the operator stopped during the suite: %v\n", err)
		code = 1
	default:
	}
	if strings.Contains(logs.String(), "panic") {
		fmt.Fprintln(os.Stderr, "FAIL: the operator logged a panic")
		code = 1
	}
	if os.Getenv("STACKYARD_TEST_LOG") != "" {
		fmt.Fprintln(os.Stderr, logs.String())
	}
	return code
}
