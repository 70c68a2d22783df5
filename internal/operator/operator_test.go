package operator_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	pulumiv1alpha1 "github.com/stackyard/stackyard/api/pulumi/v1alpha1"
	"github.com/stackyard/stackyard/internal/operator"
	"github.com/stackyard/stackyard/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = testenv.Start(testenv.Options{
		AddToScheme: []func(*k8sruntime.Scheme) error{pulumiv1.AddToScheme, pulumiv1alpha1.AddToScheme, autov1alpha1.AddToScheme},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// replica is one running operator process, as far as the API server and
// a kubelet's probes can tell.
type replica struct {
	probes string
	stop   func()
}

// startReplica assembles and starts an operator with leader election, as
// `stackyard operator` runs in a cluster, acting as the operator's
// ServiceAccount with the generated role only.
func startReplica(t *testing.T, cfg *rest.Config) *replica {
	t.Helper()
	probes := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	op, err := operator.New(ctx, cfg, operator.Options{
		Runtime:                      operator.RuntimeLocal,
		StateDir:                     t.TempDir(),
		ProbeAddr:                    probes,
		LeaderElection:               true,
		LeaderElectionNamespace:      "stackyard-system",
		SkipControllerNameValidation: true,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = op.Start(ctx)
	}()
	r := &replica{probes: probes, stop: func() { cancel(); <-done }}
	t.Cleanup(r.stop)
	return r
}

// TestLeaderElectionAndProbes starts two replicas: both answer their health
// and readiness probes, exactly one holds the leader Lease, and when it stops
// the other takes the Lease over.
func TestLeaderElectionAndProbes(t *testing.T) {
	g := NewWithT(t)
	cfg, err := env.ServiceAccountConfig(context.Background(), "stackyard-system", "stackyard", testenv.OperatorRoles()...)
	g.Expect(err).NotTo(HaveOccurred())

	first := startReplica(t, cfg)
	lease := &coordinationv1.Lease{}
	key := types.NamespacedName{Namespace: "stackyard-system", Name: "stackyard.pulumi.com"}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), key, lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
	}, time.Minute, 250*time.Millisecond).Should(Succeed())
	leader := *lease.Spec.HolderIdentity

	second := startReplica(t, cfg)
	for _, r := range []*replica{first, second} {
		for _, path := range []string{"/healthz", "/readyz"} {
			g.Eventually(func() (int, error) { return probe(r.probes, path) }, 30*time.Second, 250*time.Millisecond).
				Should(Equal(http.StatusOK), "%s of %s", path, r.probes)
		}
	}
	g.Expect(env.Client.Get(context.Background(), key, lease)).To(Succeed())
	g.Expect(*lease.Spec.HolderIdentity).To(Equal(leader), "the second replica must not take a held lease")

	// A stopping leader releases the Lease: it is free at once, not after
	// the 15 s lease duration, and the second replica takes it.
	first.stop()
	g.Expect(env.Client.Get(context.Background(), key, lease)).To(Succeed())
	g.Expect(lease.Spec.HolderIdentity).To(Or(BeNil(), HaveValue(Not(Equal(leader)))), "the stopped leader did not release the Lease")
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), key, lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
		g.Expect(*lease.Spec.HolderIdentity).NotTo(BeEmpty())
		g.Expect(*lease.Spec.HolderIdentity).NotTo(Equal(leader))
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed(), "the second replica did not take over")
}

func probe(addr, path string) (int, error) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String()
}

// TestNewRefusesIncompleteOptions checks the settings without which the
// operator would start and then fail in ways that are hard to trace.
func TestNewRefusesIncompleteOptions(t *testing.T) {
	g := NewWithT(t)
	_, err := operator.New(context.Background(), env.Config, operator.Options{Runtime: operator.RuntimeLocal})
	g.Expect(err).To(MatchError(ContainSubstring("state directory")))
	_, err = operator.New(context.Background(), env.Config, operator.Options{Runtime: operator.RuntimeKubernetes, StateDir: t.TempDir()})
	g.Expect(err).To(MatchError(ContainSubstring("--artifact-url")))
}
