package flux

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
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

	gitA := createSource(t, ns, "GitRepository", "repo-a")
	createSource(t, ns, "GitRepository", "repo-b")
	oci := createSource(t, ns, "OCIRepository", "repo-a") // same name, other kind
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
	// The Stacks' own creation events arrive first.
	waitFor(t, rec, ns, []string{"a1", "a2", "b", "oci", barrier}, nil)

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

	// A new artifact on repo-a enqueues exactly the Stacks referencing it.
	publish(t, gitA, metav1.ConditionTrue, "http://source.test/a.tar.gz", "sha256:"+hex64('a'), "main@sha1:1")
	waitFor(t, rec, ns, []string{"a1", "a2"}, []string{"b", "oci"})

	// A status change that leaves the artifact alone enqueues nothing.
	if err := unstructuredSetMessage(gitA, "reconciled again"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Status().Update(ctx, gitA); err != nil {
		t.Fatal(err)
	}
	publish(t, oci, metav1.ConditionTrue, "http://source.test/o.tar.gz", "sha256:"+hex64('b'), "latest@sha256:1")
	waitFor(t, rec, ns, []string{"oci"}, []string{"a1", "a2", "b"})
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

// hex64 returns 64 copies of c, the hex part of a fake sha256 digest.
func hex64(c byte) string { return strings.Repeat(string(c), 64) }

// unstructuredSetMessage changes the message of u's first condition.
func unstructuredSetMessage(u *unstructured.Unstructured, msg string) error {
	conds, _, err := unstructured.NestedSlice(u.Object, "status", "conditions")
	if err != nil || len(conds) == 0 {
		return err
	}
	conds[0].(map[string]any)["message"] = msg
	return unstructured.SetNestedSlice(u.Object, conds, "status", "conditions")
}
