package update

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/internal/controller/workspace"
	"github.com/stackyard/stackyard/test/testenv"
)

// fixture is one test's namespace, agents, operator logs and metrics.
type fixture struct {
	t       *testing.T
	ns      string
	rt      *testRuntime
	logs    *testenv.SyncBuffer
	metrics *recordingMetrics
}

// newFixture creates a namespace of the test's own.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "update-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	f := &fixture{
		t:       t,
		ns:      ns.Name,
		rt:      &testRuntime{agents: map[types.NamespacedName]*testAgent{}},
		logs:    &testenv.SyncBuffer{},
		metrics: &recordingMetrics{},
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator log:\n%s", f.logs.String())
		}
	})
	return f
}

// startManager starts a manager running the Update reconciler over the
// test's namespace, logging to f.logs at debug level (V(1), what an
// operator run with debug logging writes; client-go's request traces sit
// further down and are not the controller's). The
// returned function stops it, as an operator shutdown does; it also runs
// at the end of the test.
func (f *fixture) startManager(opts Options) (stop func()) {
	t := f.t
	t.Helper()
	logger := funcr.New(func(prefix, args string) {
		_, _ = f.logs.Write([]byte(prefix + " " + args + "\n"))
	}, funcr.Options{Verbosity: 1})
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:     env.Scheme,
		Logger:     logger,
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{f.ns: {}}},
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("creating a manager: %v", err)
	}
	opts.Metrics = f.metrics
	r := &Reconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Runtime: f.rt, Recorder: mgr.GetEventRecorder("update-controller"), Options: opts}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatalf("setting up the reconciler: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// workspace starts an agent with the test program and config, selects
// (creating) the test stack, and creates the Workspace name marked Ready
// and Active, as the Workspace controller would once its agent serves.
func (f *fixture) workspace(name string, config map[string]any) *testAgent {
	f.t.Helper()
	return f.newWorkspace(name, config, true)
}

// newWorkspace is workspace with the agent marked Active or idle.
func (f *fixture) newWorkspace(name string, config map[string]any, active bool) *testAgent {
	t := f.t
	t.Helper()
	a := startAgent(t)
	ctx := testContext(t)
	if _, err := a.client.SelectStack(ctx, &agentpb.SelectStackRequest{StackName: testStack, Create: true}); err != nil {
		t.Fatalf("SelectStack: %v", err)
	}
	if len(config) > 0 {
		f.setConfig(a, config)
	}
	f.rt.mu.Lock()
	f.rt.agents[types.NamespacedName{Namespace: f.ns, Name: name}] = a
	f.rt.mu.Unlock()

	ws := &autov1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec:       autov1alpha1.WorkspaceSpec{Stacks: []autov1alpha1.WorkspaceStack{{Name: testStack}}},
	}
	if err := env.Client.Create(ctx, ws); err != nil {
		t.Fatalf("creating workspace %s: %v", name, err)
	}
	f.setServing(name, active)
	return a
}

// setServing marks the Workspace name Ready for its generation, and Active
// when active (its agent runs) or idle when not, as the Workspace
// controller does.
func (f *fixture) setServing(name string, active bool) {
	t := f.t
	t.Helper()
	ws := &autov1alpha1.Workspace{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: name}, ws); err != nil {
		t.Fatalf("reading workspace %s: %v", name, err)
	}
	ws.Status.ObservedGeneration = ws.Generation
	apimeta.SetStatusCondition(&ws.Status.Conditions, metav1.Condition{
		Type: autov1alpha1.WorkspaceReady, Status: metav1.ConditionTrue, ObservedGeneration: ws.Generation,
		Reason: autov1alpha1.WorkspaceReasonSucceeded, Message: "the stacks are set up",
	})
	activeCond := metav1.Condition{
		Type: autov1alpha1.WorkspaceActive, Status: metav1.ConditionFalse, ObservedGeneration: ws.Generation,
		Reason: workspace.ReasonIdle, Message: "the agent is stopped",
	}
	ws.Status.Address = ""
	if active {
		activeCond.Status, activeCond.Reason, activeCond.Message = metav1.ConditionTrue, workspace.ReasonRunning, "the agent serves"
		ws.Status.Address = f.rt.agent(ws).address
	}
	apimeta.SetStatusCondition(&ws.Status.Conditions, activeCond)
	if err := env.Client.Status().Update(context.Background(), ws); err != nil {
		t.Fatalf("writing the status of workspace %s: %v", name, err)
	}
}

// setConfig sets the stack configuration of a's selected stack.
func (f *fixture) setConfig(a *testAgent, config map[string]any) {
	t := f.t
	t.Helper()
	var items []*agentpb.ConfigItem
	for k, v := range config {
		pv, err := structpb.NewValue(v)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, &agentpb.ConfigItem{Key: k, V: &agentpb.ConfigItem_Value{Value: pv}})
	}
	if _, err := a.client.SetAllConfig(testContext(t), &agentpb.SetAllConfigRequest{Config: items}); err != nil {
		t.Fatalf("SetAllConfig: %v", err)
	}
}

// testContext bounds one call made by the test.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// createUpdate creates an Update of typ on the test stack of workspace ws,
// changed by the mutators.
func (f *fixture) createUpdate(name, ws string, typ autov1alpha1.UpdateType, mutate ...func(*autov1alpha1.Update)) *autov1alpha1.Update {
	f.t.Helper()
	u := &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec:       autov1alpha1.UpdateSpec{WorkspaceName: ws, StackName: testStack, Type: typ},
	}
	for _, m := range mutate {
		m(u)
	}
	if err := env.Client.Create(context.Background(), u); err != nil {
		f.t.Fatalf("creating Update %s: %v", name, err)
	}
	return u
}

// get reads the Update name, or returns nil when it does not exist.
func (f *fixture) get(name string) *autov1alpha1.Update {
	f.t.Helper()
	u := &autov1alpha1.Update{}
	err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatalf("reading Update %s: %v", name, err)
	}
	return u
}

// waitFor polls the Update name until cond holds (cond gets nil once the
// Update is gone) and returns it; it fails the test after timeout.
func (f *fixture) waitFor(name string, timeout time.Duration, what string, cond func(*autov1alpha1.Update) bool) *autov1alpha1.Update {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		u := f.get(name)
		if cond(u) {
			return u
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("Update %s: not %s after %s; status: %s", name, what, timeout, statusJSON(u))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitComplete waits until the Update name is complete.
func (f *fixture) waitComplete(name string, timeout time.Duration) *autov1alpha1.Update {
	f.t.Helper()
	return f.waitFor(name, timeout, "complete", func(u *autov1alpha1.Update) bool { return u != nil && u.Status.IsComplete() })
}

// waitRunning waits until the operation of the Update name has started.
func (f *fixture) waitRunning(name string, timeout time.Duration) *autov1alpha1.Update {
	f.t.Helper()
	return f.waitFor(name, timeout, "running", func(u *autov1alpha1.Update) bool {
		return u != nil && progressingReason(u) == autov1alpha1.UpdateReasonInProgress
	})
}

// progressingReason is the reason of a Progressing=True condition, or "".
func progressingReason(u *autov1alpha1.Update) string {
	c := apimeta.FindStatusCondition(u.Status.Conditions, autov1alpha1.UpdateConditionTypeProgressing)
	if c == nil || c.Status != metav1.ConditionTrue {
		return ""
	}
	return c.Reason
}

// failedReason is the reason of the Failed condition.
func failedReason(u *autov1alpha1.Update) string {
	if c := apimeta.FindStatusCondition(u.Status.Conditions, autov1alpha1.UpdateConditionTypeFailed); c != nil {
		return c.Reason
	}
	return ""
}

// statusJSON renders an Update's status for failure messages.
func statusJSON(u *autov1alpha1.Update) string {
	if u == nil {
		return "<gone>"
	}
	b, _ := json.Marshal(u.Status)
	return string(b)
}

// events returns the notes of the events about the Update name, as
// "<type> <reason>: <note>", once at least n exist (events are sent
// asynchronously).
func (f *fixture) events(name string, n int) []string {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		list := &eventsv1.EventList{}
		if err := env.Client.List(context.Background(), list, client.InNamespace(f.ns)); err != nil {
			f.t.Fatalf("listing events: %v", err)
		}
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Name == name {
				out = append(out, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Note))
			}
		}
		if len(out) >= n || time.Now().After(deadline) {
			return out
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// secret reads a Secret of the test's namespace.
func (f *fixture) secret(name string) *corev1.Secret {
	f.t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: name}, s); err != nil {
		f.t.Fatalf("reading Secret %s: %v", name, err)
	}
	return s
}

// observation is one call of Metrics.ObserveUpdate.
type observation struct {
	updateType, result string
	duration           time.Duration
}

// recordingMetrics records the observations it gets.
type recordingMetrics struct {
	mu  sync.Mutex
	obs []observation
}

func (m *recordingMetrics) ObserveUpdate(updateType, result string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.obs = append(m.obs, observation{updateType, result, d})
}

// ObserveRefusal records a refusal as an observation of updateType with
// the result "refused:" and the reason.
func (m *recordingMetrics) ObserveRefusal(updateType, reason string) {
	m.ObserveUpdate(updateType, "refused:"+reason, 0)
}

// observed reports whether n observations of updateType with result
// arrive within a few seconds: they are made just after the status write
// that the test sees.
func (m *recordingMetrics) observed(updateType, result string, n int) bool {
	deadline := time.Now().Add(5 * time.Second)
	for m.count(updateType, result) < n && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	return m.count(updateType, result) == n
}

// count returns how many observations of updateType with result exist.
func (m *recordingMetrics) count(updateType, result string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, o := range m.obs {
		if o.updateType == updateType && o.result == result {
			n++
		}
	}
	return n
}

// assertNoSecret fails the test if secret occurs in any of texts.
func assertNoSecret(t *testing.T, secret string, texts map[string]string) {
	t.Helper()
	if len(secret) < 8 {
		t.Fatalf("the secret %q is too short to search for", secret)
	}
	for where, text := range texts {
		if strings.Contains(text, secret) {
			t.Errorf("the secret output's value leaked into %s", where)
		}
	}
}
