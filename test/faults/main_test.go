package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/testenv"
)

// Environment knobs.
const (
	// envSeed replays a run's random choices.
	envSeed = "FAULTS_SEED"
	// envN is the number of operator kills (scenario 1).
	envN = "FAULTS_N"
)

// params are the counts of one run of the scenarios.
type params struct {
	// OperatorKills is how many times the operator is killed (FAULTS_N).
	OperatorKills int
	// Stacks is how many Stacks change while the operator is killed.
	Stacks int
	// AgentKills is how many updates lose their agent.
	AgentKills int
	// GitOutages is how many times the git host goes away.
	GitOutages int
	// DiskFills is how many times the workspaces' disk fills up.
	DiskFills int
	// APIServerRestarts is how many times kube-apiserver is stopped and
	// started again during updates.
	APIServerRestarts int
	// PromotionLeaderKills is how many promotions lose their leader.
	PromotionLeaderKills int
	// StubbornHang adds the hang of a provider that ignores its timeout
	// and cancellation, which costs the agent's 30 s grace period.
	StubbornHang bool
}

// passphrase encrypts the stacks' secrets in the file backend.
const passphrase = "faults-passphrase-5d0c"

// project is the Pulumi project name of every program here.
const project = "faults"

// suite is what the scenarios share: one control plane, one git server,
// one file backend and one operator process. The scenarios run one after
// the other, since some of them kill the operator.
type suite struct {
	env     *testenv.Env
	client  client.Client
	op      *testenv.Operator
	git     *gitserver.Server
	tmp     string
	backend string // the file:// backend's directory
	outDir  string // where the programs' File resources write
	params  params

	bin      string       // the stackyard binary
	opConfig *rest.Config // the operator's identity: its ServiceAccount
}

// operatorNamespace holds the operator's ServiceAccount and its
// leader-election Lease.
const operatorNamespace = "stackyard-system"

// TestFaults starts the shared components and runs every scenario as a
// subtest: `-run TestFaults/operator-killed` runs one.
func TestFaults(t *testing.T) {
	// Registered first, so it runs last: the operator's log comes
	// between a failure's messages and the end of the output, so they
	// are repeated here, with the seeds that replay them, for a report
	// that keeps only the end.
	var failed []string
	t.Cleanup(func() {
		if len(failed) > 0 {
			t.Logf("failed scenarios: %s; what failed, again:\n%s", strings.Join(failed, ", "), failureSummary())
		}
	})
	s := startSuite(t)
	t.Cleanup(func() {
		// Not a failure of any scenario: the operator ended these stops
		// at its shutdown timeout, and said what it waited on.
		for _, stuck := range s.op.SlowStops() {
			t.Logf("noticed: the operator took longer than its slow-stop report to stop; it waited on:\n%s", stuck)
		}
	})
	t.Logf("counts: %+v", s.params)
	for _, scenario := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"operator-killed", s.testOperatorKilled},
		{"agent-killed", s.testAgentKilled},
		{"hang", s.testHang},
		{"git-unreachable", s.testGitUnreachable},
		{"disk-full", s.testDiskFull},
		{"apiserver-restart", s.testAPIServerRestart},
		{"promotion-leader-killed", s.testPromotionLeaderKilled},
	} {
		if !t.Run(scenario.name, scenario.run) {
			failed = append(failed, scenario.name)
		}
	}
}

// startSuite starts the control plane, the git server and the operator.
func startSuite(t *testing.T) *suite {
	t.Helper()
	if err := testenv.RequireBinaries(append([]string{"etcd", "kube-apiserver"}, testenv.PulumiBinaries...)...); err != nil {
		fatal(t, err)
	}
	tmp := t.TempDir()
	if err := testenv.IsolatePulumi(tmp, passphrase); err != nil {
		fatal(t, err)
	}
	s := &suite{tmp: tmp, backend: filepath.Join(tmp, "backend"), outDir: filepath.Join(tmp, "out"), params: defaults}
	s.params.OperatorKills = testenv.PositiveIntEnv(t, envN, s.params.OperatorKills)
	for _, dir := range []string{s.backend, s.outDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fatal(t, err)
		}
	}
	s.git = gitserver.New(t)

	env, err := testenv.Start(testenv.Options{AddToScheme: []func(*k8sruntime.Scheme) error{
		pulumiv1.AddToScheme, autov1alpha1.AddToScheme, promotionv1alpha1.AddToScheme,
	}})
	if err != nil {
		fatal(t, err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	s.env, s.client = env, env.Client

	bin, err := testenv.BuildStackyard(tmp)
	if err != nil {
		fatal(t, err)
	}
	// The operator acts as its ServiceAccount with the packaged roles
	// only, as in a cluster.
	cfg, err := env.ServiceAccountConfig(context.Background(), operatorNamespace, "stackyard", testenv.OperatorRoles()...)
	if err != nil {
		fatal(t, err)
	}
	s.bin, s.opConfig = bin, cfg
	s.op = testenv.StartOperator(t, testenv.OperatorOptions{Bin: bin, Dir: tmp, Config: cfg})
	return s
}

// seeded returns the random source of one scenario, from FAULTS_SEED or
// the clock, and logs the seed and how to replay it.
func seeded(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := strings.TrimSpace(os.Getenv(envSeed)); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			fatalf(t, "%s=%q: want an unsigned integer", envSeed, v)
		}
		seed = n
	}
	rememberSeed(t, seed)
	t.Logf("seed %d (replay: %s=%d go test [-tags faults] -run '^%s$' ./test/faults/)", seed, envSeed, seed, t.Name())
	return rand.New(rand.NewPCG(seed, seed^0x5eed))
}

// workspaceDir is the local runtime's state directory of the Workspace of
// Stack ns/name (the Workspace is named after the Stack): the agent runs
// there.
func (s *suite) workspaceDir(ns, name string) string {
	return filepath.Join(s.op.StateDir, "workspaces", ns, name)
}

// fmtDuration rounds d for a log line.
func fmtDuration(d time.Duration) string { return fmt.Sprint(d.Round(100 * time.Millisecond)) }
