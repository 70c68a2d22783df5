package stack_test

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	pulumiv1alpha1 "github.com/stackyard/stackyard/api/pulumi/v1alpha1"
	"github.com/stackyard/stackyard/internal/operator"
	"github.com/stackyard/stackyard/internal/shard"
	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/testenv"
)

// The whole operator (Program, Stack, Workspace and Update controllers, the
// artifact server, the local runtime running the real agent) runs against
// the real API server, with the real pulumi CLI, YAML host and test
// provider, and git's own http-backend.
var (
	env      *testenv.Env
	agentBin string
	stateDir string
	// stopOperator stops the running operator; tests that restart it call
	// it and then startOperator.
	stopOperator func()
	// metricsAddr is where the operator serves its Prometheus metrics.
	metricsAddr string
	// operatorConfig acts as the operator's ServiceAccount, bound to the
	// generated ClusterRole only: every test also checks config/rbac.
	operatorConfig *rest.Config
)

const passphrase = "passphrase-of-the-stack-suite-9c1e"

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	if fuzzWorker() || benchmarksOnly() {
		// `go test -fuzz` runs TestMain again in every fuzzing worker,
		// which runs only the (pure) fuzz target, and the benchmarks
		// (stack_bench_test.go) are pure too: no control plane.
		return m.Run()
	}
	required := append([]string{"etcd", "kube-apiserver", "crds/flux/.version"}, testenv.PulumiBinaries...)
	if err := testenv.RequireBinaries(required...); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "stack-controller-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	stateDir = filepath.Join(tmp, "operator")
	if err := testenv.IsolatePulumi(tmp, passphrase); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if agentBin, err = testenv.BuildStackyard(tmp); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The operator logs at every verbosity into operatorLogs, checked for
	// secrets after the tests; STACKYARD_TEST_LOG=1 also prints them, when
	// a test fails without saying why.
	ctrl.SetLogger(zap.New(zap.WriteTo(logWriter()), zap.Level(zapcore.Level(-4))))
	neverLogged(passphrase)
	env, err = testenv.Start(testenv.Options{
		AddToScheme:  []func(*k8sruntime.Scheme) error{pulumiv1.AddToScheme, pulumiv1alpha1.AddToScheme, autov1alpha1.AddToScheme},
		ExtraCRDDirs: []string{filepath.Join(testenv.BinDir(), "crds", "flux")},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	operatorConfig, err = env.ServiceAccountConfig(context.Background(), "stackyard-system", "stackyard", testenv.OperatorRoles()...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	if err := startOperator(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: starting the operator: %v\n", err)
		return 1
	}
	defer func() { stopOperator() }()
	code := m.Run()
	if leaks := leakedSecrets(); len(leaks) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: secret values reached the operator's logs:\n%s\n", strings.Join(leaks, "\n"))
		return 1
	}
	return code
}

// fuzzWorker reports whether this process is a fuzzing worker of
// `go test -fuzz`.
func fuzzWorker() bool {
	flag.Parse()
	f := flag.Lookup("test.fuzzworker")
	return f != nil && f.Value.String() == "true"
}

// benchmarksOnly reports whether this run selects no test and some
// benchmarks (`go test -run '^$' -bench ...`, as `make bench-go` runs).
func benchmarksOnly() bool {
	flag.Parse()
	run, bench := flag.Lookup("test.run"), flag.Lookup("test.bench")
	return run != nil && run.Value.String() == "^$" && bench != nil && bench.Value.String() != ""
}

// startOperator assembles and starts the suite's operator with the local
// runtime: unsharded, so it reconciles every Stack. Each start serves its
// metrics on a port found free just before (metricsAddr), not on the last
// start's: between a stop and the next start, any process on the machine
// (another package's, under make test's -p 4) may take the port the stop
// released, and did.
func startOperator() error {
	for attempt := 1; ; attempt++ {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		stop, exited, err := launch(stateDir, addr, shard.Shard{})
		if err != nil {
			return err
		}
		// The port was free when freeAddr looked, but another process may
		// bind it before the manager does, and the manager then stops at
		// once: it has started only once its metrics answer.
		err = serving(addr, exited)
		if err == nil {
			metricsAddr, stopOperator = addr, stop
			return nil
		}
		stop()
		if attempt == 5 {
			return err
		}
	}
}

// serving waits until the metrics at addr answer, and fails when exited
// is closed first (the operator stopped) or after a minute.
func serving(addr string, exited <-chan struct{}) error {
	deadline := time.After(time.Minute)
	for {
		if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
			_ = resp.Body.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("the operator stopped before its metrics on %s answered", addr)
		case <-deadline:
			return fmt.Errorf("the operator's metrics on %s did not answer within a minute", addr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// launchOperator assembles and starts an operator with the local runtime,
// its state in state and its metrics on metrics ("0": none), reconciling
// the shard sh, and returns what stops it.
func launchOperator(state, metrics string, sh shard.Shard) (func(), error) {
	stop, _, err := launch(state, metrics, sh)
	return stop, err
}

// launch is launchOperator, and also returns a channel closed when the
// operator has stopped, whatever stopped it.
func launch(state, metrics string, sh shard.Shard) (func(), <-chan struct{}, error) {
	ctx, cancel := context.WithCancel(context.Background())
	op, err := operator.New(ctx, operatorConfig, operator.Options{
		Runtime:     operator.RuntimeLocal,
		StateDir:    state,
		AgentPath:   agentBin,
		ToolDirs:    []string{testenv.BinDir()},
		AgentEnv:    map[string]string{"PULUMI_CONFIG_PASSPHRASE": passphrase},
		MetricsAddr: metrics,
		IdleAfter:   5 * time.Second,
		MinResync:   time.Second,
		// A failure that lasts this long stalls; errors_test.go waits for
		// it, and TestGitHostOutage shows an outage shorter than it does not.
		StallAfter: 8 * time.Second,
		Shard:      sh,
		// Tests that restart the operator assemble it again in this process.
		SkipControllerNameValidation: true,
	})
	if err != nil {
		cancel()
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := op.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "operator stopped:", err)
		}
	}()
	return func() {
		cancel()
		<-done
	}, done, nil
}

// freeAddr returns a loopback address with a port free now, for a server
// that is started (and restarted) later on the same address.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String(), nil
}

// programSource serves a Pulumi YAML project from a new git repository,
// on branch main, and returns the Stack's git source for it.
func programSource(t *testing.T, name, project string) *shared.GitSource {
	t.Helper()
	repo := gitserver.New(t).CreateRepo(name)
	repo.Commit("main", map[string]string{"Pulumi.yaml": project})
	return &shared.GitSource{ProjectRepo: repo.URL, Branch: "main"}
}

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	return env.NewNamespace(t, "stack-")
}

// getStack reads a Stack, or nil when it does not exist.
func getStack(g Gomega, ns, name string) *pulumiv1.Stack {
	s := &pulumiv1.Stack{}
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s)
	if client.IgnoreNotFound(err) != nil {
		g.Expect(err).NotTo(HaveOccurred())
	}
	if err != nil {
		return nil
	}
	return s
}

// waitStack polls a Stack until check passes.
func waitStack(t *testing.T, ns, name string, timeout time.Duration, check func(g Gomega, s *pulumiv1.Stack)) *pulumiv1.Stack {
	t.Helper()
	var last *pulumiv1.Stack
	NewWithT(t).Eventually(func(g Gomega) {
		last = getStack(g, ns, name)
		g.Expect(last).NotTo(BeNil(), "the Stack does not exist")
		check(g, last)
	}, timeout, 250*time.Millisecond).Should(Succeed(), func() string { return describe(last) })
	return last
}

// describe renders a Stack's status for failure messages, with what it
// may be waiting for: every Workspace and Update of its namespace, with
// their shard labels, and the other Stacks there (a prerequisite).
func describe(s *pulumiv1.Stack) string {
	if s == nil {
		return "no stack"
	}
	out := describeStack(s)
	ctx := context.Background()
	var stacks pulumiv1.StackList
	if err := env.Client.List(ctx, &stacks, client.InNamespace(s.Namespace)); err == nil {
		for i := range stacks.Items {
			if o := &stacks.Items[i]; o.Name != s.Name {
				out += "other " + describeStack(o)
			}
		}
	}
	var workspaces autov1alpha1.WorkspaceList
	if err := env.Client.List(ctx, &workspaces, client.InNamespace(s.Namespace)); err == nil {
		for _, ws := range workspaces.Items {
			out += fmt.Sprintf("workspace %s [shard %q] generation %d observed %d address %q\n", ws.Name, ws.Labels[shard.Label], ws.Generation, ws.Status.ObservedGeneration, ws.Status.Address)
			for _, c := range ws.Status.Conditions {
				out += fmt.Sprintf("  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
			}
		}
	}
	var updates autov1alpha1.UpdateList
	if err := env.Client.List(ctx, &updates, client.InNamespace(s.Namespace)); err == nil {
		for _, u := range updates.Items {
			out += fmt.Sprintf("update %s (%s) [shard %q] uid %s workspace %s: %s\n", u.Name, u.Spec.Type, u.Labels[shard.Label], u.UID, u.Spec.WorkspaceName, u.Status.Message)
			for _, c := range u.Status.Conditions {
				out += fmt.Sprintf("  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
			}
		}
	}
	return out
}

// describeStack renders one Stack's status and records.
func describeStack(s *pulumiv1.Stack) string {
	out := fmt.Sprintf("stack %s [shard %q] generation %d, observedGeneration %d\n", s.Name, s.Labels[shard.Label], s.Generation, s.Status.ObservedGeneration)
	for _, c := range s.Status.Conditions {
		out += fmt.Sprintf("  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	if cu := s.Status.CurrentUpdate; cu != nil {
		out += fmt.Sprintf("  currentUpdate %s uid %s\n", cu.Name, cu.UID)
	}
	if w := s.Status.Workspace; w != nil {
		out += fmt.Sprintf("  workspace record %s uid %s\n", w.Name, w.UID)
	}
	if lu := s.Status.LastUpdate; lu != nil {
		out += fmt.Sprintf("  lastUpdate %s %s %s failures=%d: %s\n", lu.Name, lu.Type, lu.State, lu.Failures, lu.Message)
	}
	return out
}
