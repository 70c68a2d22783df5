package operator_test

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	pulumiv1alpha1 "github.com/stackyard/stackyard/api/pulumi/v1alpha1"
	"github.com/stackyard/stackyard/internal/leader"
	"github.com/stackyard/stackyard/internal/operator"
	"github.com/stackyard/stackyard/internal/shard"
	"github.com/stackyard/stackyard/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = testenv.Start(testenv.Options{
		AddToScheme: []func(*k8sruntime.Scheme) error{pulumiv1.AddToScheme, pulumiv1alpha1.AddToScheme, autov1alpha1.AddToScheme},
		// The operator's role names Flux's kinds: TestWatchNamespaces asks
		// the API server the scope of every resource in it.
		ExtraCRDDirs: []string{filepath.Join(testenv.BinDir(), "crds", "flux")},
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
// ServiceAccount with the generated role only. pod is the replica's own
// Pod in stackyard-system (--pod).
func startReplica(t *testing.T, cfg *rest.Config, pod string) *replica {
	t.Helper()
	return startOperator(t, cfg, operator.Options{
		LeaderElection:          true,
		LeaderElectionNamespace: "stackyard-system",
		Pod:                     types.NamespacedName{Namespace: "stackyard-system", Name: pod},
	})
}

// startOperator assembles and starts an operator with opts, on the local
// runtime with a state directory and probes of its own, and stops it when
// the test ends.
func startOperator(t *testing.T, cfg *rest.Config, opts operator.Options) *replica {
	t.Helper()
	opts.Runtime = operator.RuntimeLocal
	opts.StateDir = t.TempDir()
	opts.ProbeAddr = freeAddr(t)
	opts.SkipControllerNameValidation = true
	ctx, cancel := context.WithCancel(context.Background())
	op, err := operator.New(ctx, cfg, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = op.Start(ctx)
	}()
	r := &replica{probes: opts.ProbeAddr, stop: func() {
		cancel()
		// A manager whose caches never synced (its rights fall short)
		// does not stop; the test has failed already and must end.
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the operator did not stop within 30s of its context's end")
		}
	}}
	t.Cleanup(r.stop)
	return r
}

// TestLeaderElectionAndProbes starts two replicas: both answer their health
// and readiness probes, exactly one holds the leader Lease and carries the
// leader label on its Pod (which the artifacts Service selects), and when
// it stops the other takes the Lease and the label over. The Pods are
// objects only: nothing runs in them, but the API server treats their
// labels as it would a kubelet's pods'.
func TestLeaderElectionAndProbes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cfg, err := env.ServiceAccountConfig(ctx, "stackyard-system", "stackyard", testenv.OperatorRoles()...)
	g.Expect(err).NotTo(HaveOccurred())

	// The two replicas' Pods, a Pod left labelled by an earlier leader of
	// the same installation, and one of another installation, whose label
	// is not this installation's business.
	install := map[string]string{"app.kubernetes.io/name": "stackyard", "app.kubernetes.io/instance": "stackyard"}
	other := map[string]string{"app.kubernetes.io/name": "stackyard", "app.kubernetes.io/instance": "other"}
	createPod(t, "stackyard-a", install, false)
	createPod(t, "stackyard-b", install, false)
	createPod(t, "stackyard-old", install, true)
	createPod(t, "other-x", other, true)

	first := startReplica(t, cfg, "stackyard-a")
	lease := &coordinationv1.Lease{}
	key := types.NamespacedName{Namespace: "stackyard-system", Name: "stackyard.pulumi.com"}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
	}, time.Minute, 250*time.Millisecond).Should(Succeed())
	leader := *lease.Spec.HolderIdentity
	g.Eventually(leaderPods, 30*time.Second, 100*time.Millisecond).Should(ConsistOf("stackyard-a", "other-x"),
		"the leader labels its own Pod and unlabels the installation's others")

	// A Pod that still carries the label from an earlier life as leader
	// (its container restarted) loses it when its replica starts as a
	// standby.
	setLeaderLabel(t, "stackyard-b")
	second := startReplica(t, cfg, "stackyard-b")
	for _, r := range []*replica{first, second} {
		for _, path := range []string{"/healthz", "/readyz"} {
			g.Eventually(func() (int, error) { return probe(r.probes, path) }, 30*time.Second, 250*time.Millisecond).
				Should(Equal(http.StatusOK), "%s of %s", path, r.probes)
		}
	}
	g.Eventually(leaderPods, 30*time.Second, 100*time.Millisecond).Should(ConsistOf("stackyard-a", "other-x"),
		"a standby removes a stale leader label from its own Pod")
	g.Expect(env.Client.Get(ctx, key, lease)).To(Succeed())
	g.Expect(*lease.Spec.HolderIdentity).To(Equal(leader), "the second replica must not take a held lease")

	// A stopping leader releases the Lease, so it is free at once, not
	// after the 15 s lease duration, and removes its Pod's label on the
	// way out; the second replica takes both over.
	first.stop()
	g.Expect(env.Client.Get(ctx, key, lease)).To(Succeed())
	g.Expect(lease.Spec.HolderIdentity).To(Or(BeNil(), HaveValue(Not(Equal(leader)))), "the stopped leader did not release the Lease")
	g.Expect(leaderPods()).NotTo(ContainElement("stackyard-a"), "the stopped leader kept its label")
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
		g.Expect(*lease.Spec.HolderIdentity).NotTo(BeEmpty())
		g.Expect(*lease.Spec.HolderIdentity).NotTo(Equal(leader))
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed(), "the second replica did not take over")
	g.Eventually(leaderPods, 30*time.Second, 100*time.Millisecond).Should(ConsistOf("stackyard-b", "other-x"),
		"the new leader did not label its Pod")
}

// createPod creates the Pod name in stackyard-system with labels, and the
// leader label when leader is set; it is deleted when the test ends.
func createPod(t *testing.T, name string, labels map[string]string, leaderLabel bool) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "stackyard-system", Name: name, Labels: maps.Clone(labels)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "ghcr.io/stackyard/stackyard:latest"}}},
	}
	if leaderLabel {
		pod.Labels[leader.Label] = "true"
	}
	if err := env.Client.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pod, client.GracePeriodSeconds(0)) })
}

// setLeaderLabel puts the leader label on the Pod name, as an administrator.
func setLeaderLabel(t *testing.T, name string) {
	t.Helper()
	pod := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: "stackyard-system", Name: name}, pod); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(pod.DeepCopy())
	pod.Labels[leader.Label] = "true"
	if err := env.Client.Patch(context.Background(), pod, patch); err != nil {
		t.Fatal(err)
	}
}

// leaderPods names the Pods of stackyard-system that carry the leader
// label, as the artifacts Service's selector sees them.
func leaderPods() ([]string, error) {
	var pods corev1.PodList
	if err := env.Client.List(context.Background(), &pods, client.InNamespace("stackyard-system"), client.MatchingLabels{leader.Label: "true"}); err != nil {
		return nil, err
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	return names, nil
}

// TestWatchNamespaces starts an operator that watches one namespace, bound
// as the chart binds it with watchNamespaces: the generated ClusterRole by
// RoleBindings (in the watched namespace and, to show that the watch and
// not RBAC keeps it out, in another one), only the rules on cluster-scoped
// resources cluster-wide, and the Role of its own namespace. Its cache
// could not list anything cluster-wide. It reconciles the Program and the
// Stack of the watched namespace and leaves the same objects in the other
// namespace untouched.
func TestWatchNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	watched, unwatched := env.NewNamespace(t, "watched-"), env.NewNamespace(t, "unwatched-")
	cfg := watchingServiceAccount(t, "stackyard-watch", "stackyard", watched, unwatched)

	// The objects exist before the operator starts, so that its first
	// sync sees both namespaces' at once.
	for _, ns := range []string{unwatched, watched} {
		g.Expect(env.Client.Create(ctx, &pulumiv1.Program{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site"},
			Program:    pulumiv1.ProgramSpec{Outputs: map[string]apiextensionsv1.JSON{"greeting": {Raw: []byte(`"hello"`)}}},
		})).To(Succeed())
		// The Stack's Program does not exist: it is reconciled to a wait,
		// and no Workspace is made.
		g.Expect(env.Client.Create(ctx, &pulumiv1.Stack{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
			Spec:       shared.StackSpec{Stack: "dev", ProgramRef: &shared.ProgramReference{Name: "absent"}},
		})).To(Succeed())
	}

	startOperator(t, cfg, operator.Options{WatchNamespaces: []string{watched}})

	g.Eventually(func(g Gomega) {
		var p pulumiv1.Program
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: watched, Name: "site"}, &p)).To(Succeed())
		g.Expect(p.Status.Artifact).NotTo(BeNil())
		var s pulumiv1.Stack
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: watched, Name: "app"}, &s)).To(Succeed())
		g.Expect(s.Finalizers).NotTo(BeEmpty())
		g.Expect(s.Status.Conditions).NotTo(BeEmpty())
	}, time.Minute, 100*time.Millisecond).Should(Succeed(), "the watched namespace's Program and Stack were not reconciled")

	// Both namespaces' objects were in the operator's first sync, so by now
	// it would have reached the other namespace's too; a little longer
	// makes sure.
	g.Consistently(func(g Gomega) {
		var p pulumiv1.Program
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: unwatched, Name: "site"}, &p)).To(Succeed())
		g.Expect(p.Finalizers).To(BeEmpty())
		g.Expect(p.Status.Artifact).To(BeNil())
		var s pulumiv1.Stack
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: unwatched, Name: "app"}, &s)).To(Succeed())
		g.Expect(s.Finalizers).To(BeEmpty())
		g.Expect(s.Status.Conditions).To(BeEmpty())
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed(), "the operator reconciled a namespace it does not watch")
}

// watchingServiceAccount creates the ServiceAccount namespace/name bound as
// the chart binds the operator with watchNamespaces set to namespaces, and
// returns a config that acts as it.
func watchingServiceAccount(t *testing.T, namespace, name string, namespaces ...string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	roles := testenv.OperatorRoles()
	var manager rbacv1.ClusterRole
	readYAML(t, roles[0], &manager)
	var own rbacv1.Role
	readYAML(t, roles[1], &own)
	clusterRules, err := testenv.ClusterScopedRules(env.Client.RESTMapper(), manager.Rules)
	if err != nil {
		t.Fatal(err)
	}

	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}}
	prefix := namespace + ":" + name + ":"
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: prefix + "manager"}, Rules: manager.Rules},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: prefix + "cluster-scope"}, Rules: clusterRules},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: prefix + "cluster-scope"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: prefix + "cluster-scope"},
			Subjects:   subjects,
		},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: own.Name}, Rules: own.Rules},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: own.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: own.Name},
			Subjects:   subjects,
		},
	}
	for _, ns := range namespaces {
		objs = append(objs, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-manager"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: prefix + "manager"},
			Subjects:   subjects,
		})
	}
	for _, obj := range objs {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return cfg
}

// readYAML decodes the YAML file path into obj, refusing unknown fields.
func readYAML(t *testing.T, path string, obj any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := sigsyaml.UnmarshalStrict(data, obj); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
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
	_, err = operator.New(context.Background(), env.Config, operator.Options{
		Runtime: operator.RuntimeLocal, StateDir: t.TempDir(), WatchNamespaces: []string{"apps", "Team_B"},
	})
	g.Expect(err).To(MatchError(ContainSubstring(`--watch-namespaces: "Team_B" is not a namespace name`)))
	_, err = operator.New(context.Background(), env.Config, operator.Options{
		Runtime: operator.RuntimeLocal, StateDir: t.TempDir(), Shard: shard.Shard{Name: "blue"}, DashboardAddr: ":8090",
	})
	g.Expect(err).To(MatchError(ContainSubstring("--dashboard-bind-address=:8090: shard blue cannot serve it; the default shard serves it for every shard")))
}

// TestShardLeaders starts the default shard and shard blue of one
// installation, each with leader election, as the chart deploys them: each
// shard takes a Lease of its own, and each leader labels its own Pod
// without taking the label from the other shard's leader, whose artifacts
// Service selects it.
func TestShardLeaders(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cfg, err := env.ServiceAccountConfig(ctx, "stackyard-system", "stackyard", testenv.OperatorRoles()...)
	g.Expect(err).NotTo(HaveOccurred())
	install := map[string]string{"app.kubernetes.io/name": "stackyard", "app.kubernetes.io/instance": "sharded"}
	withShard := func(name string) map[string]string {
		l := maps.Clone(install)
		l[shard.PodLabel] = name
		return l
	}
	createPod(t, "sharded-default", withShard(shard.DefaultName), false)
	createPod(t, "sharded-blue", withShard("blue"), false)
	// Left labelled by an earlier leader of shard blue: blue's leader
	// unlabels it, the default shard's leaves it alone.
	createPod(t, "sharded-blue-old", withShard("blue"), true)

	def, err := shard.New("", []string{"blue"})
	g.Expect(err).NotTo(HaveOccurred())
	blue, err := shard.New("blue", []string{"blue"})
	g.Expect(err).NotTo(HaveOccurred())
	for pod, sh := range map[string]shard.Shard{"sharded-default": def, "sharded-blue": blue} {
		startOperator(t, cfg, operator.Options{
			LeaderElection: true, LeaderElectionNamespace: "stackyard-system", Shard: sh,
			Pod: types.NamespacedName{Namespace: "stackyard-system", Name: pod},
		})
	}
	for _, name := range []string{"stackyard.pulumi.com", "blue.shard.stackyard.pulumi.com"} {
		g.Eventually(func(g Gomega) {
			var lease coordinationv1.Lease
			g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: "stackyard-system", Name: name}, &lease)).To(Succeed())
			g.Expect(lease.Spec.HolderIdentity).To(HaveValue(Not(BeEmpty())))
		}, time.Minute, 250*time.Millisecond).Should(Succeed(), "no leader holds Lease %s", name)
	}
	g.Eventually(leaderPods, 30*time.Second, 100*time.Millisecond).Should(ConsistOf("sharded-default", "sharded-blue"),
		"each shard's leader labels its own Pod, and unlabels only its own shard's others")
	// Each leader labels its own Pod and then, at once, unlabels the
	// others it selects; nothing announces the end of that pass, so a
	// short watch stands for it.
	g.Consistently(leaderPods, 2*time.Second, 100*time.Millisecond).Should(ConsistOf("sharded-default", "sharded-blue"))
}
