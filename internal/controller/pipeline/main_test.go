package pipeline

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/source"
	"github.com/stackyard/stackyard/test/testenv"
)

// The Pipeline controller runs against the real API server as the
// operator's ServiceAccount, bound to the generated RBAC only, and polls
// git's own http-backend (test/gitserver) through one shared poller.
var (
	env *testenv.Env
	// logs holds everything the controller logged, checked for secrets.
	logs testenv.SyncBuffer
)

// Timing of the suite: Pipelines poll every pollInterval; a failure that
// lasts stallAfter stalls.
const (
	pollInterval = 2 * time.Second
	stallAfter   = 3 * time.Second
)

// neverLogged are secret values the tests use; none may reach the logs.
var neverLogged = []string{"right-password-7c1f", "wrong-password-93ad"}

func TestMain(m *testing.M) { os.Exit(run(m)) }

// fuzzWorker reports whether this process is a fuzzing worker of
// `go test -fuzz`, which runs only the (pure) fuzz target.
func fuzzWorker() bool {
	flag.Parse()
	f := flag.Lookup("test.fuzzworker")
	return f != nil && f.Value.String() == "true"
}

// run starts the control plane and a manager with the Pipeline controller,
// runs the tests and stops everything again.
func run(m *testing.M) int {
	if fuzzWorker() {
		return m.Run()
	}
	os.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	var out io.Writer = &logs
	if os.Getenv("STACKYARD_TEST_LOG") != "" {
		out = io.MultiWriter(&logs, os.Stderr)
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(out), zap.Level(zapcore.Level(-4))))
	var err error
	env, err = testenv.Start(testenv.Options{AddToScheme: []func(*k8sruntime.Scheme) error{promotionv1alpha1.AddToScheme}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	cfg, err := env.ServiceAccountConfig(context.Background(), "stackyard-system", "stackyard", testenv.OperatorRoles()...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Recorder: mgr.GetEventRecorder("pipeline-controller"),
		Poller: source.NewPoller(), Options: Options{MinInterval: time.Second, StallAfter: stallAfter}}
	if err := r.SetupWithManager(mgr); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
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
	for _, s := range neverLogged {
		if strings.Contains(logs.String(), s) {
			fmt.Fprintf(os.Stderr, "FAIL: the secret value %q reached the logs\n", s)
			return 1
		}
	}
	return code
}

// pipelineOn returns a Pipeline named name in ns on repoURL, polled every
// pollInterval, with its git subscription adjusted by mutate.
func pipelineOn(ns, name, repoURL string, mutate func(*promotionv1alpha1.GitSubscription)) *promotionv1alpha1.Pipeline {
	p := &promotionv1alpha1.Pipeline{}
	p.Namespace, p.Name = ns, name
	p.Spec.Git = promotionv1alpha1.GitSubscription{RepoURL: repoURL, Branch: "main"}
	p.Spec.Interval = &metav1.Duration{Duration: pollInterval}
	if mutate != nil {
		mutate(&p.Spec.Git)
	}
	return p
}

// create creates obj as an administrator, failing the test on error.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// waitPipeline polls a Pipeline until check passes and returns it.
func waitPipeline(t *testing.T, ns, name string, timeout time.Duration, check func(g Gomega, p *promotionv1alpha1.Pipeline)) *promotionv1alpha1.Pipeline {
	t.Helper()
	var last promotionv1alpha1.Pipeline
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &last)).To(Succeed())
		check(g, &last)
	}, timeout, 200*time.Millisecond).Should(Succeed(), func() string { return describePipeline(&last) })
	return &last
}

// releasesOf lists the Releases labelled with the pipeline's name, by
// commit SHA.
func releasesOf(g Gomega, ns, pipeline string) map[string]promotionv1alpha1.Release {
	var list promotionv1alpha1.ReleaseList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns),
		client.MatchingLabels{promotionv1alpha1.PipelineLabel: pipeline})).To(Succeed())
	out := map[string]promotionv1alpha1.Release{}
	for _, rel := range list.Items {
		out[rel.Spec.Commit.SHA] = rel
	}
	return out
}

// eventsOf returns the notes of the events regarding the named object,
// by reason.
func eventsOf(g Gomega, ns, name string) map[string][]string {
	var list eventsv1.EventList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	out := map[string][]string{}
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out[e.Reason] = append(out[e.Reason], e.Note)
		}
	}
	return out
}

// describePipeline renders a Pipeline's status for failure messages.
func describePipeline(p *promotionv1alpha1.Pipeline) string {
	out := fmt.Sprintf("generation %d, observedGeneration %d, latest %q\n", p.Generation, p.Status.ObservedGeneration, p.Status.LatestRelease)
	for _, c := range p.Status.Conditions {
		out += fmt.Sprintf("  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	return out
}
