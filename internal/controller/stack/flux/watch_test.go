package flux

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/test/fluxsc"
	"github.com/stackyard/stackyard/test/gitserver"
)

// recorder is a reconciler that only remembers which Stacks it was asked
// to reconcile.
type recorder struct {
	mu   sync.Mutex
	seen []types.NamespacedName
}

// Reconcile records the request.
func (r *recorder) Reconcile(_ context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.mu.Lock()
	r.seen = append(r.seen, req.NamespacedName)
	r.mu.Unlock()
	return ctrl.Result{}, nil
}

// take returns the names recorded so far and forgets them.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for _, n := range r.seen {
		if !slices.Contains(names, n.Name) {
			names = append(names, n.Name)
		}
	}
	slices.Sort(names)
	r.seen = nil
	return names
}

// stackFor returns a Stack whose program comes from the Flux source kind/name.
func stackFor(ns, name, kind, source string) *pulumiv1.Stack {
	return &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: shared.StackSpec{
			Stack: "dev",
			FluxSource: &shared.FluxSource{SourceRef: shared.FluxSourceReference{
				APIVersion: Group + "/v1", Kind: kind, Name: source,
			}},
		},
	}
}

// TestWatchEnqueuesReferencingStacks runs the Stack controller's watch of
// Flux sources (Watches, StacksFor, ArtifactChanged) in a manager of its own
// with a reconciler that only records, against sources that Flux's real
// source-controller reconciles: a new artifact enqueues exactly the Stacks
// that reference the source, by kind and name, and the status writes of a
// reconcile that finds nothing new enqueue none.
func TestWatchEnqueuesReferencingStacks(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := newNamespace(t)

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := SetupIndex(ctx, mgr.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	sources, err := Watches(mgr.GetRESTMapper())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	// One worker, which takes requests in the order they were queued:
	// waitFor relies on it.
	b := ctrl.NewControllerManagedBy(mgr).Named("fluxwatchtest").For(&pulumiv1.Stack{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1})
	for _, obj := range sources {
		b = b.Watches(obj, handler.EnqueueRequestsFromMapFunc(StacksFor(mgr.GetClient())), builder.WithPredicates(ArtifactChanged()))
	}
	if err := b.Complete(rec); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	// The sources, reconciled by Flux's source-controller from a git
	// server and a registry on loopback; a new artifact is published only
	// when the test asks for a reconcile.
	sc := fluxsc.Start(t, env)
	git := gitserver.New(t)
	repoA, repoB := git.CreateRepo("repo-a"), git.CreateRepo("repo-b")
	project := map[string]string{"Pulumi.yaml": "name: app\nruntime: yaml\n"}
	repoA.Commit("main", project)
	repoB.Commit("main", project)
	registryHost := ociRegistry(t)
	pushProgram(t, registryHost, "app", "latest", map[string][]byte{"Pulumi.yaml": []byte(project["Pulumi.yaml"])})
	gitSpec := func(url string) map[string]any {
		return map[string]any{"url": url, "interval": "1h", "ref": map[string]any{"branch": "main"}}
	}
	gitA := createSource(t, sc, ns, "GitRepository", "repo-a", gitSpec(repoA.URL))
	gitB := createSource(t, sc, ns, "GitRepository", "repo-b", gitSpec(repoB.URL))
	// Same name as gitA, other kind.
	oci := createSource(t, sc, ns, "OCIRepository", "repo-a", map[string]any{
		"url": "oci://" + registryHost + "/app", "insecure": true, "interval": "1h", "ref": map[string]any{"tag": "latest"},
	})
	for _, st := range []*pulumiv1.Stack{
		stackFor(ns, "a1", "GitRepository", "repo-a"),
		stackFor(ns, "a2", "GitRepository", "repo-a"),
		stackFor(ns, "b", "GitRepository", "repo-b"),
		stackFor(ns, "oci", "OCIRepository", "repo-a"),
		stackFor(ns, barrier, "GitRepository", "no-such-source"),
	} {
		if err := env.Client.Create(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	// The Stacks' own creation events arrive first; then every source
	// publishes its first artifact, which enqueues its Stacks again.
	waitFor(t, rec, ns, []string{"a1", "a2", "b", "oci", barrier}, nil)
	for _, src := range []*unstructured.Unstructured{gitA, gitB, oci} {
		fluxsc.Wait(t, env.Client, src, fluxTimeout, fluxsc.Ready)
	}
	settle(t, mgr, rec, ns, gitA, gitB, oci)

	// The map function alone, through the manager's cache and index.
	reqs := StacksFor(mgr.GetClient())(ctx, gitA)
	var names []string
	for _, r := range reqs {
		names = append(names, r.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a1", "a2"}) {
		t.Errorf("StacksFor(GitRepository repo-a) = %v, want [a1 a2]", names)
	}

	// A new commit on repo-a, and its new artifact, enqueue exactly the
	// Stacks referencing it.
	rev := "main@sha1:" + repoA.Commit("main", map[string]string{"README.md": "a change"})
	if _, err := fluxsc.RequestReconcile(ctx, env.Client, gitA); err != nil {
		t.Fatal(err)
	}
	fluxsc.Wait(t, env.Client, gitA, fluxTimeout, fluxsc.Revision(rev))
	waitFor(t, rec, ns, []string{"a1", "a2"}, []string{"b", "oci"})
	settle(t, mgr, rec, ns, gitA)

	// Flux reconciling repo-a again with nothing new writes its status
	// (the Reconciling condition comes and goes, lastHandledReconcileAt
	// changes) but leaves the artifact alone: nothing is enqueued.
	requested, err := fluxsc.RequestReconcile(ctx, env.Client, gitA)
	if err != nil {
		t.Fatal(err)
	}
	if got := fluxsc.Artifact(fluxsc.Wait(t, env.Client, gitA, fluxTimeout, fluxsc.Handled(requested))).Revision; got != rev {
		t.Fatalf("repo-a's artifact changed to %s without a commit", got)
	}
	if enqueued := settle(t, mgr, rec, ns, gitA); len(enqueued) > 0 {
		t.Errorf("Stacks %v were enqueued when repo-a was reconciled with nothing new", enqueued)
	}

	// A new artifact pushed to the OCIRepository's tag enqueues only the
	// Stack referencing it, not those referencing the GitRepository of the
	// same name.
	digest := pushProgram(t, registryHost, "app", "latest", map[string][]byte{"Pulumi.yaml": []byte(project["Pulumi.yaml"]), "README.md": []byte("new")})
	if _, err := fluxsc.RequestReconcile(ctx, env.Client, oci); err != nil {
		t.Fatal(err)
	}
	fluxsc.Wait(t, env.Client, oci, fluxTimeout, fluxsc.Revision("latest@"+digest))
	waitFor(t, rec, ns, []string{"oci"}, []string{"a1", "a2", "b"})
}

// settle waits until the manager's cache holds the sources as the API
// server has them now, then until the controller has reconciled the barrier
// Stack touched after that, and returns the other Stacks rec saw since it
// was last emptied, emptying it. Events of the sources' writes are handed
// to the controller as the cache takes them in, so once the barrier is
// through, every Stack those writes enqueued has been reconciled and is in
// the list.
func settle(t *testing.T, mgr ctrl.Manager, rec *recorder, ns string, sources ...*unstructured.Unstructured) []string {
	t.Helper()
	ctx := context.Background()
	for _, src := range sources {
		deadline := time.Now().Add(time.Minute)
		for {
			live, cached := &unstructured.Unstructured{}, &unstructured.Unstructured{}
			live.SetGroupVersionKind(src.GroupVersionKind())
			cached.SetGroupVersionKind(src.GroupVersionKind())
			key := client.ObjectKeyFromObject(src)
			if err := env.Client.Get(ctx, key, live); err != nil {
				t.Fatal(err)
			}
			if err := mgr.GetCache().Get(ctx, key, cached); err == nil && cached.GetResourceVersion() == live.GetResourceVersion() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the manager's cache never caught up with %s %s", src.GetKind(), src.GetName())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Whatever rec saw before, the barrier included, counts.
	seen := rec.take()
	seen = slices.DeleteFunc(seen, func(n string) bool { return n == barrier })
	touch(t, ns, barrier)
	deadline := time.Now().Add(time.Minute)
	for {
		names := rec.take()
		done := slices.Contains(names, barrier)
		for _, n := range names {
			if n != barrier && !slices.Contains(seen, n) {
				seen = append(seen, n)
			}
		}
		if done {
			slices.Sort(seen)
			return seen
		}
		if time.Now().After(deadline) {
			t.Fatalf("the barrier Stack was never reconciled (saw %v)", seen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// barrier is a Stack that references no source the tests change; waitFor
// touches it to mark a point in the controller's queue.
const barrier = "barrier"

// waitFor waits until rec has seen every Stack in want, then checks that
// none in never was enqueued, and clears what rec saw. The check is by
// order, not by waiting a while: waitFor touches the barrier Stack, which
// enqueues it after whatever the event under test enqueued, and since the
// controller's one worker takes requests in the order they were queued,
// by the time the barrier is reconciled every Stack queued before it has
// been too.
func waitFor(t *testing.T, rec *recorder, ns string, want, never []string) {
	t.Helper()
	var seen []string
	until := func(names []string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			for _, n := range rec.take() {
				if !slices.Contains(seen, n) {
					seen = append(seen, n)
				}
			}
			all := true
			for _, n := range names {
				all = all && slices.Contains(seen, n)
			}
			if all {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("reconciled %v, want %v", seen, names)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	until(want)
	if len(never) == 0 {
		return
	}
	seen = slices.DeleteFunc(seen, func(n string) bool { return n == barrier })
	touch(t, ns, barrier)
	until([]string{barrier})
	for _, n := range never {
		if slices.Contains(seen, n) {
			t.Errorf("Stack %s was enqueued but does not reference the changed source (saw %v)", n, seen)
		}
	}
}

// touch changes an annotation of the Stack ns/name, which enqueues it.
func touch(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	var s pulumiv1.Stack
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	s.Annotations = map[string]string{"test.stackyard.dev/touched": strconv.FormatInt(time.Now().UnixNano(), 10)}
	if err := env.Client.Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
}
