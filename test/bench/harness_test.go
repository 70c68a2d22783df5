//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	notificationv1alpha1 "github.com/stackyard/stackyard/api/notification/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/testenv"
)

// project is the Pulumi project name of the benchmark program.
const project = "bench"

// passphrase encrypts the stacks' secrets (there are none) in the file
// backend, for the operator's agents and the bare CLI alike.
const passphrase = "bench"

// program is the benchmark's Pulumi YAML program: one file per stack,
// whose content is the config value the latency figure changes, and a
// random suffix, with the test provider. It is the sample program of
// `stackyard dev` with a per-stack path.
func program(outDir string) string {
	return fmt.Sprintf(`name: %s
runtime: yaml
config:
  message:
    type: string
    default: hello
resources:
  greeting:
    type: stackyardtest:index:File
    properties:
      path: %s/${pulumi.stack}.txt
      content: ${message}
  suffix:
    type: stackyardtest:index:Random
    properties:
      length: 6
outputs:
  sha256: ${greeting.sha256}
  suffix: ${suffix.result}
`, project, outDir)
}

// harness is the running system under measurement.
type harness struct {
	env     *testenv.Env
	client  client.WithWatch
	git     *gitserver.Server
	repo    *gitserver.Repo
	backend string // file:// backend directory shared by operator and CLI
	progDir string // a checkout of the program for the bare CLI
	outDir  string // where the program's File resources write
	rec     *recorder

	op     *testenv.Operator
	opArgs []string
	// receiverURL is the operator's Receiver endpoint.
	receiverURL string
	idleAfter   time.Duration
}

// startHarness starts the control plane, the git server with the program,
// the operator as a process of its own, and the watch recorder.
func startHarness(t *testing.T, idleAfter time.Duration) *harness {
	t.Helper()
	if err := testenv.RequireBinaries(append([]string{"etcd", "kube-apiserver"}, testenv.PulumiBinaries...)...); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	if err := testenv.IsolatePulumi(tmp, passphrase); err != nil {
		t.Fatal(err)
	}
	outDir := filepath.Join(tmp, "out")
	h := &harness{idleAfter: idleAfter, backend: filepath.Join(tmp, "backend"), progDir: filepath.Join(tmp, "program"), outDir: outDir}
	for _, dir := range []string{h.backend, h.progDir, outDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(h.progDir, "Pulumi.yaml"), []byte(program(outDir)), 0o644); err != nil {
		t.Fatal(err)
	}
	h.git = gitserver.New(t)
	h.repo = h.git.CreateRepo(project)
	h.repo.Commit("main", map[string]string{"Pulumi.yaml": program(outDir)})

	env, err := testenv.Start(testenv.Options{AddToScheme: []func(*k8sruntime.Scheme) error{
		pulumiv1.AddToScheme, autov1alpha1.AddToScheme, promotionv1alpha1.AddToScheme, notificationv1alpha1.AddToScheme,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	// The operator promotes into a gated stage only under the policies.
	if err := env.InstallPolicies(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.env = env
	h.client, err = client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.rec = newRecorder()
	go watchLoop(ctx, h.client, &pulumiv1.StackList{}, h.rec.onStack)
	go watchLoop(ctx, h.client, &autov1alpha1.UpdateList{}, h.rec.onUpdate)

	h.startOperator(t, tmp)
	return h
}

// startOperator builds stackyard from this tree and runs `stackyard
// operator --runtime local` against the control plane, with the
// administrator's kubeconfig.
func (h *harness) startOperator(t *testing.T, tmp string) {
	t.Helper()
	bin, err := testenv.BuildStackyard(tmp)
	if err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeAddr(t)
	h.receiverURL = "http://" + addr
	h.op = testenv.StartOperator(t, testenv.OperatorOptions{
		Bin:    bin,
		Dir:    tmp,
		Config: h.env.Config,
		// BENCH_OPERATOR_ARGS adds flags, such as --pprof-bind-address to
		// profile the operator during a figure.
		Args: append([]string{"--idle-after", h.idleAfter.String(), "--receiver-bind-address", addr}, extraOperatorArgs()...),
	})
	h.opArgs = h.op.Args
}

// pid is the operator's process id.
func (h *harness) pid() int { return h.op.Pid() }

// stack returns the benchmark Stack namespace/name for Pulumi stack
// stackName, with the message config value.
func (h *harness) stack(namespace, name, stackName, message string) *pulumiv1.Stack {
	return &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: shared.StackSpec{
			Stack:     stackName,
			Backend:   "file://" + h.backend,
			GitSource: &shared.GitSource{ProjectRepo: h.repo.URL, Branch: "main"},
			EnvRefs:   map[string]shared.ResourceRef{"PULUMI_CONFIG_PASSPHRASE": shared.NewLiteralResourceRef(passphrase)},
			Config:    map[string]apiextensionsv1.JSON{project + ":message": jsonString(message)},
		},
	}
}

// extraOperatorArgs are the flags BENCH_OPERATOR_ARGS adds to every
// operator a figure starts, such as --pprof-bind-address to profile it.
func extraOperatorArgs() []string { return strings.Fields(os.Getenv("BENCH_OPERATOR_ARGS")) }

// jsonString is s as a JSON config value.
func jsonString(s string) apiextensionsv1.JSON {
	return apiextensionsv1.JSON{Raw: []byte(strconv.Quote(s))}
}

// createNamespace creates namespace name.
func (h *harness) createNamespace(t *testing.T, name string) {
	t.Helper()
	if err := h.client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
}

// pulumi runs the pinned CLI on the program checkout against the shared
// backend and returns how long it took.
func (h *harness) pulumi(args ...string) (time.Duration, error) {
	return h.pulumiIn(h.progDir, args...)
}

// bareUp is the floor: what a person runs by hand for a new stack, on the
// file backend in backend.
func (h *harness) bareUp(backend, stackName string) (time.Duration, error) {
	init, err := pulumiOn(backend, h.progDir, "stack", "init", "--no-select", "--stack", stackName)
	if err != nil {
		return 0, err
	}
	up, err := pulumiOn(backend, h.progDir, "up", "--stack", stackName, "--yes", "--skip-preview")
	return init + up, err
}

// freshBackend returns the directory of a new, empty file backend. Each
// burst and each run of its floor gets one: the CLI slows down as a file
// backend fills (10 bare stacks took 6.9 s beside about 100 others, and
// 8.3 s beside about 2,200), so a shared one would make whatever runs last
// look slower.
func freshBackend(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "backend")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// inParallel calls do for 0..n-1 on workers goroutines, and returns the
// first error, naming its item, once every call has returned.
func inParallel(n, workers int, do func(i int) error) error {
	work := make(chan int)
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := do(i); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("item %d: %w", i, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	return first
}

// requestCount sums the operator's rest_client_requests_total.
func (h *harness) requestCount() (float64, error) {
	return h.op.Metric("rest_client_requests_total")
}

// readyMark is a Stack seen Ready with a given observed generation and
// last Update, at the first watch event that showed it.
type readyMark struct {
	at         time.Time
	generation int64
	lastUpdate string
	// stamped is the Ready condition's lastTransitionTime, which the
	// operator sets (whole seconds): beside at, it tells a late operator
	// from a late watch.
	stamped time.Time
}

// recorder keeps, from watch events timed on arrival with time.Now, when
// each Update was first seen, started and completed, and when each Stack
// turned Ready with which generation and Update.
type recorder struct {
	mu       sync.Mutex
	created  map[string]time.Time
	started  map[string]time.Time
	complete map[string]time.Time
	failed   map[string]string
	ready    map[string][]readyMark
}

func newRecorder() *recorder {
	return &recorder{created: map[string]time.Time{}, started: map[string]time.Time{}, complete: map[string]time.Time{},
		failed: map[string]string{}, ready: map[string][]readyMark{}}
}

// onUpdate records the phases of an Update.
func (r *recorder) onUpdate(obj k8sruntime.Object, at time.Time) {
	u, ok := obj.(*autov1alpha1.Update)
	if !ok {
		return
	}
	key := u.Namespace + "/" + u.Name
	r.mu.Lock()
	defer r.mu.Unlock()
	first := func(m map[string]time.Time) {
		if _, seen := m[key]; !seen {
			m[key] = at
		}
	}
	first(r.created)
	if c := apimeta.FindStatusCondition(u.Status.Conditions, autov1alpha1.UpdateConditionTypeProgressing); c != nil &&
		c.Status == metav1.ConditionTrue && c.Reason == autov1alpha1.UpdateReasonInProgress {
		first(r.started)
	}
	if u.Status.IsComplete() {
		first(r.complete)
		if u.Status.IsFailed() {
			r.failed[key] = u.Status.Message
		}
	}
}

// onStack records a Stack turning Ready.
func (r *recorder) onStack(obj k8sruntime.Object, at time.Time) {
	s, ok := obj.(*pulumiv1.Stack)
	if !ok || !sreconcile.IsReady(s.Status.Conditions) || s.Status.LastUpdate == nil {
		return
	}
	key := s.Namespace + "/" + s.Name
	mark := readyMark{at: at, generation: s.Status.ObservedGeneration, lastUpdate: s.Status.LastUpdate.Name}
	if c := apimeta.FindStatusCondition(s.Status.Conditions, sreconcile.ReadyCondition); c != nil {
		mark.stamped = c.LastTransitionTime.Time
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.ready[key] {
		if m.generation == mark.generation && m.lastUpdate == mark.lastUpdate {
			return
		}
	}
	r.ready[key] = append(r.ready[key], mark)
}

// readyAfter returns the first mark of Stack key with at least generation
// and a last Update other than prev.
func (r *recorder) readyAfter(key string, generation int64, prev string) (readyMark, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.ready[key] {
		if m.generation >= generation && m.lastUpdate != prev {
			return m, true
		}
	}
	return readyMark{}, false
}

// burstTimeout bounds the wait for a burst of n Stacks.
func burstTimeout(n int) time.Duration { return 10*time.Minute + time.Duration(n)*6*time.Second }

// stackKeys are the namespace/name keys of the n Stacks ns/<prefix>0000 …
func stackKeys(ns, prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s/%s%04d", ns, prefix, i)
	}
	return keys
}

// waitReady waits, up to burstTimeout, until every Stack of keys has a
// readyAfter mark (generation, and a last Update other than prev[i]; prev
// may be nil). It returns each one's mark (zero when not seen) and how many
// were seen.
func (r *recorder) waitReady(keys []string, generation int64, prev []string) ([]readyMark, int) {
	marks := make([]readyMark, len(keys))
	found := 0
	waitFor(burstTimeout(len(keys)), func() bool {
		found = 0
		for i, key := range keys {
			last := ""
			if prev != nil {
				last = prev[i]
			}
			if m, ok := r.readyAfter(key, generation, last); ok {
				marks[i] = m
				found++
			}
		}
		return found == len(keys)
	})
	return marks, found
}

// readySince returns how long after start each mark was seen, shortest
// first.
func readySince(marks []readyMark, start time.Time) []time.Duration {
	out := make([]time.Duration, len(marks))
	for i, m := range marks {
		out[i] = m.at.Sub(start)
	}
	slices.Sort(out)
	return out
}

// updateTimes returns when Update key was created, started and completed
// (zero times for what was not seen) and its failure message.
func (r *recorder) updateTimes(key string) (created, started, complete time.Time, failure string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.created[key], r.started[key], r.complete[key], r.failed[key]
}

// failures returns the failure messages of the Updates in namespace.
func (r *recorder) failures(namespace string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for k, msg := range r.failed {
		if strings.HasPrefix(k, namespace+"/") {
			out = append(out, k+": "+msg)
		}
	}
	return out
}

// watchLoop watches every object of list's kind in all namespaces, handing
// each event to on with its arrival time, and watches again when the watch
// ends, until ctx is done.
func watchLoop(ctx context.Context, c client.WithWatch, list client.ObjectList, on func(k8sruntime.Object, time.Time)) {
	for ctx.Err() == nil {
		w, err := c.Watch(ctx, list)
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			at := time.Now()
			if ev.Type == watch.Error {
				break
			}
			on(ev.Object, at)
		}
		w.Stop()
	}
}

// waitFor polls cond every 20 ms (the times it checks come from watch
// events, so polling only decides when the test notices) until it holds or
// timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
