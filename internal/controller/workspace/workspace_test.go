package workspace_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/internal/controller/workspace"
	"github.com/stackyard/stackyard/internal/pulumiversion"
	"github.com/stackyard/stackyard/internal/runtime/local"
	"github.com/stackyard/stackyard/test/gitserver"
)

// TestLocalWorkspace follows one Workspace through its life: set up with a
// Secret-backed environment, idled, woken by a pending Update, restarted
// after its agent dies, idled again when the Update completes, deleted.
func TestLocalWorkspace(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createBackendSecret(t, ns)
	const idleAfter = 3 * time.Second
	op := startOperator(t, ns, t.TempDir(), workspace.Options{IdleAfter: idleAfter})
	ws := newWorkspace(t, ns, "app")
	// A setup record where an earlier release kept it, in annotations
	// anyone who may edit the Workspace can write: it is not trusted, and
	// the setup removes it.
	legacy := "workspace.stackyard.dev/setup"
	ws.Annotations = map[string]string{legacy: "0123456789abcdef0123"}
	if err := env.Client.Create(ctx(t), ws); err != nil {
		t.Fatal(err)
	}

	ws = waitServing(t, ns, ws.Name)
	if setup := ws.Status.Setup; ws.Status.PulumiVersion != pulumiversion.Pinned || !strings.HasPrefix(ws.Status.Address, "127.0.0.1:") ||
		setup == nil || setup.Digest == "" || setup.Installed == "" {
		t.Errorf("status = %s, version %q, setup %+v", describe(ws), ws.Status.PulumiVersion, setup)
	}
	if v, ok := ws.Annotations[legacy]; ok {
		t.Errorf("the legacy setup annotation is still there (%q)", v)
	}
	if !hasFinalizer(ws) {
		t.Errorf("finalizers = %v", ws.Finalizers)
	}

	// The stack exists, and its configuration (one value read by the agent
	// from a Secret-backed env var) reaches the program. The Update stands
	// for the operation, keeping the agent active while it runs.
	up := createUpdate(t, ns, "up-1", ws.Name)
	outputs := upOutputs(t, agentClient(t, op, ws))
	completeUpdate(t, up)
	if got := outputs["greeting"].GetValue().GetStringValue(); got != "hello" {
		t.Errorf("greeting output = %q", got)
	}
	if tok := outputs["token"]; !tok.GetSecret() || tok.GetValue().GetStringValue() != secretToken {
		t.Errorf("token output = %v, want the Secret's value, marked secret", tok)
	}

	// No Update is pending: the agent is idled after IdleAfter; Ready stays.
	pid := op.rt.PID(ns, ws.Name)
	ws = waitCondition(t, ns, ws.Name, autov1alpha1.WorkspaceActive, metav1.ConditionFalse, workspace.ReasonIdle)
	if !ws.Status.IsReady() || ws.Status.Address != "" || ws.Serving() {
		t.Errorf("idle workspace: %s", describe(ws))
	}
	eventually(t, 15*time.Second, "the idled agent to exit", func() (bool, string) { return !alive(pid), fmt.Sprint(pid) })

	// A pending Update wakes it up.
	u := createUpdate(t, ns, "preview-2", ws.Name)
	ws = waitServing(t, ns, ws.Name)
	pid = op.rt.PID(ns, ws.Name)
	if !alive(pid) {
		t.Fatalf("no agent after waking up: %s", describe(ws))
	}

	// An agent that dies is noticed and started again.
	_ = syscall.Kill(pid, syscall.SIGKILL)
	eventually(t, 30*time.Second, "a new agent", func() (bool, string) {
		p := op.rt.PID(ns, ws.Name)
		return p != 0 && p != pid && alive(p), fmt.Sprintf("pid %d", p)
	})
	waitServing(t, ns, ws.Name)

	// Still active while the Update is pending (past IdleAfter), idle
	// again once it completes. Not idling is a negative check no event can
	// end: the controller says when it idles, not each time it does not. A
	// controller that wrongly idled would do so IdleAfter after the agent
	// started serving, so a fixed wait a second longer catches it, and can
	// only pass wrongly if the controller were a second late.
	time.Sleep(idleAfter + time.Second)
	if ws = getWS(t, ns, ws.Name); !ws.Serving() {
		t.Fatalf("idled with a pending Update: %s", describe(ws))
	}
	completeUpdate(t, u)
	waitCondition(t, ns, ws.Name, autov1alpha1.WorkspaceActive, metav1.ConditionFalse, workspace.ReasonIdle)

	// Secret values appear nowhere a user or an operator sees.
	checkNoSecrets(t, op, ns, ws.Name)

	// Deleting it stops the agent and removes its state.
	createUpdate(t, ns, "preview-3", ws.Name)
	waitServing(t, ns, ws.Name)
	pid = op.rt.PID(ns, ws.Name)
	if err := env.Client.Delete(ctx(t), ws); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the workspace to be gone", func() (bool, string) {
		err := env.Client.Get(ctx(t), client.ObjectKeyFromObject(ws), &autov1alpha1.Workspace{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if alive(pid) {
		t.Errorf("agent %d survived the deletion", pid)
	}
	if _, err := os.Stat(op.rt.StateDir(ns, ws.Name)); !os.IsNotExist(err) {
		t.Errorf("state directory after deletion: %v", err)
	}

	// The agent was idled twice, seconds ago: no Idle event (the Active
	// condition tells it; an event would cost a write per update). The
	// Setup event shows that the recorder delivers.
	reasons := eventReasons(t, ns)
	if reasons[autov1alpha1.WorkspaceReasonSucceeded] == 0 || reasons[workspace.ReasonIdle] > 0 {
		t.Errorf("events by reason = %v, want a Setup (%s) and no %s", reasons, autov1alpha1.WorkspaceReasonSucceeded, workspace.ReasonIdle)
	}
}

// eventReasons counts the events of namespace ns by reason.
func eventReasons(t *testing.T, ns string) map[string]int {
	t.Helper()
	var evs eventsv1.EventList
	if err := env.Client.List(ctx(t), &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	reasons := map[string]int{}
	for _, e := range evs.Items {
		reasons[e.Reason]++
	}
	return reasons
}

// hasFinalizer reports whether ws carries the controller's finalizer.
func hasFinalizer(ws *autov1alpha1.Workspace) bool {
	for _, f := range ws.Finalizers {
		if f == autov1alpha1.WorkspaceFinalizer {
			return true
		}
	}
	return false
}

// checkNoSecrets looks for the Secret's values in the Workspace's status,
// the namespace's events and the operator's log.
func checkNoSecrets(t *testing.T, op *operator, ns, name string) {
	t.Helper()
	status, _ := json.Marshal(getWS(t, ns, name).Status)
	mustNotContain(t, "status", string(status), passphrase, secretToken)
	var evs eventsv1.EventList
	if err := env.Client.List(ctx(t), &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) == 0 {
		t.Error("no events recorded")
	}
	for _, e := range evs.Items {
		mustNotContain(t, "event "+e.Reason, e.Note, passphrase, secretToken)
	}
	mustNotContain(t, "operator log", op.logs.String(), passphrase, secretToken)
}

// TestGitWorkspace sets up a Workspace from a private git repository, then
// moves it to another commit: the source is fetched again and the stacks
// set up on the new revision.
func TestGitWorkspace(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createBackendSecret(t, ns)
	op := startOperator(t, ns, t.TempDir(), workspace.Options{IdleAfter: time.Minute})
	srv := gitserver.New(t)
	srv.SetBasicAuth("robot", "git-pa55")
	repo := srv.CreateRepo("infra")
	first := repo.Commit("main", map[string]string{"prog/Pulumi.yaml": fmt.Sprintf(program, "first")})
	second := repo.Commit("main", map[string]string{"prog/Pulumi.yaml": fmt.Sprintf(program, "second")})
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: ns},
		StringData: map[string]string{"username": "robot", "password": "git-pa55"}}
	if err := env.Client.Create(ctx(t), creds); err != nil {
		t.Fatal(err)
	}
	sel := func(key string) *corev1.SecretKeySelector {
		return &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "git"}, Key: key}
	}
	ws := newWorkspace(t, ns, "fromgit")
	ws.Spec.Local = nil
	ws.Spec.Git = &autov1alpha1.GitSource{URL: repo.URL, Ref: first, Dir: "prog",
		Auth: &autov1alpha1.GitAuth{Username: sel("username"), Password: sel("password")}}
	if err := env.Client.Create(ctx(t), ws); err != nil {
		t.Fatal(err)
	}

	ws = waitServing(t, ns, ws.Name)
	if got := setupRevision(ws); got != first {
		t.Errorf("revision = %s, want %s", got, first)
	}
	info, err := agentClient(t, op, ws).Info(ctx(t), &agentpb.InfoRequest{})
	if err != nil || info.GetProject() != "first" || info.GetStack().GetName() != "dev" {
		t.Fatalf("Info = %v, %v; want project first with stack dev selected", info, err)
	}

	ws.Spec.Git.Ref = "main"
	if err := env.Client.Update(ctx(t), ws); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "the new revision", func() (bool, string) {
		ws = getWS(t, ns, ws.Name)
		return ws.Serving() && ws.Status.ObservedGeneration == ws.Generation &&
			setupRevision(ws) == second, describe(ws)
	})
	info, err = agentClient(t, op, ws).Info(ctx(t), &agentpb.InfoRequest{})
	if err != nil || info.GetProject() != "second" {
		t.Fatalf("Info = %v, %v; want project second", info, err)
	}
	mustNotContain(t, "operator log", op.logs.String(), "git-pa55", passphrase, secretToken)
}

// TestStackSetupFailures checks that a bad config key and a missing stack
// stall the Workspace naming the field, idle its agent, and that fixing the
// spec recovers it.
func TestStackSetupFailures(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createBackendSecret(t, ns)
	op := startOperator(t, ns, t.TempDir(), workspace.Options{IdleAfter: time.Minute})

	bad := newWorkspace(t, ns, "badkey")
	bad.Spec.SkipInstall = true
	bad.Spec.Stacks[0].Config = append(bad.Spec.Stacks[0].Config,
		autov1alpha1.ConfigItem{Key: "a:b:c", Value: jsonValue(t, "x")})
	missing := newWorkspace(t, ns, "nostack")
	missing.Spec.SkipInstall = true
	missing.Spec.Stacks = append(missing.Spec.Stacks, autov1alpha1.WorkspaceStack{Name: "prod"})
	for _, ws := range []*autov1alpha1.Workspace{bad, missing} {
		if err := env.Client.Create(ctx(t), ws); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		ws   *autov1alpha1.Workspace
		want string
	}{
		{bad, `spec.stacks[0].config[2] key "a:b:c"`},
		{missing, `spec.stacks[1]: selecting stack "prod" (set create: true to create it)`},
	} {
		ws := waitCondition(t, ns, tc.ws.Name, "Stalled", metav1.ConditionTrue, autov1alpha1.WorkspaceReasonStackSetupFailed)
		ready := findCondition(ws, autov1alpha1.WorkspaceReady)
		stalled := findCondition(ws, "Stalled")
		if ready.Status != metav1.ConditionFalse || ready.Reason != autov1alpha1.WorkspaceReasonStackSetupFailed ||
			!strings.Contains(stalled.Message, tc.want) || ws.Status.ObservedGeneration != ws.Generation {
			t.Errorf("%s: %s; want a stall naming %s", ws.Name, describe(ws), tc.want)
		}
		eventually(t, 15*time.Second, tc.ws.Name+" agent idled", func() (bool, string) {
			return op.rt.PID(ns, tc.ws.Name) == 0, describe(getWS(t, ns, tc.ws.Name))
		})
	}

	// Fixing the spec starts over.
	ws := getWS(t, ns, bad.Name)
	ws.Spec.Stacks[0].Config = ws.Spec.Stacks[0].Config[:2]
	if err := env.Client.Update(ctx(t), ws); err != nil {
		t.Fatal(err)
	}
	ws = waitServing(t, ns, bad.Name)
	if findCondition(ws, "Stalled") != nil {
		t.Errorf("still stalled: %s", describe(ws))
	}
}

// findCondition returns the condition t of ws, or nil.
func findCondition(ws *autov1alpha1.Workspace, t string) *metav1.Condition {
	for i := range ws.Status.Conditions {
		if ws.Status.Conditions[i].Type == t {
			return &ws.Status.Conditions[i]
		}
	}
	return nil
}

// TestOperatorRestart stops the manager (which stops the agents) and
// starts a new one with a new runtime over the same state root: no agent
// of the old operator survives, and the Workspace serves again.
func TestOperatorRestart(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createBackendSecret(t, ns)
	root := t.TempDir()
	first := startOperator(t, ns, root, workspace.Options{IdleAfter: 10 * time.Minute})
	ws := newWorkspace(t, ns, "restart")
	if err := env.Client.Create(ctx(t), ws); err != nil {
		t.Fatal(err)
	}
	ws = waitServing(t, ns, ws.Name)
	oldPID := first.rt.PID(ns, ws.Name)
	if !alive(oldPID) {
		t.Fatalf("no agent: %s", describe(ws))
	}
	setup := ws.Status.Setup.Digest

	first.stop()
	if alive(oldPID) {
		t.Fatalf("agent %d outlived its operator", oldPID)
	}

	second := startOperator(t, ns, root, workspace.Options{IdleAfter: 10 * time.Minute})
	eventually(t, 60*time.Second, "an agent of the new operator", func() (bool, string) {
		p := second.rt.PID(ns, ws.Name)
		return p != 0 && alive(p), describe(getWS(t, ns, ws.Name))
	})
	ws = waitServing(t, ns, ws.Name)
	if second.rt.PID(ns, ws.Name) == oldPID {
		t.Error("the new operator reports the old agent")
	}
	// The state directory survived: the stacks were not set up again.
	if got := ws.Status.Setup.Digest; got != setup {
		t.Errorf("setup digest changed across the restart: %s -> %s", setup, got)
	}
	outputs := upOutputs(t, agentClient(t, second, ws))
	if outputs["greeting"].GetValue().GetStringValue() != "hello" {
		t.Errorf("outputs after restart = %v", outputs)
	}
}

// TestAgentPlaces runs two Workspaces on a runtime with room for one agent
// and an idle time far longer than the test: the second waits, queued, and
// the first, with nothing pending, gives its place up at once instead of
// staying warm.
func TestAgentPlaces(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createBackendSecret(t, ns)
	startOperator(t, ns, t.TempDir(), workspace.Options{IdleAfter: 10 * time.Minute},
		func(o *local.Options) { o.MaxAgents = 1 })
	first := newWorkspace(t, ns, "first")
	if err := env.Client.Create(ctx(t), first); err != nil {
		t.Fatal(err)
	}
	up := createUpdate(t, ns, "first-up", first.Name)
	waitServing(t, ns, first.Name)

	second := newWorkspace(t, ns, "second")
	if err := env.Client.Create(ctx(t), second); err != nil {
		t.Fatal(err)
	}
	createUpdate(t, ns, "second-up", second.Name)
	eventually(t, 30*time.Second, "the second Workspace to queue", func() (bool, string) {
		ws := getWS(t, ns, second.Name)
		c := apimeta.FindStatusCondition(ws.Status.Conditions, autov1alpha1.WorkspaceActive)
		return c != nil && strings.Contains(c.Message, "queued"), describe(ws)
	})
	if ws := getWS(t, ns, first.Name); !ws.Serving() {
		t.Fatalf("the first gave its place up with an Update pending: %s", describe(ws))
	}

	// Its Update done, the first idles at once (not after 10 minutes) and
	// the second starts.
	completeUpdate(t, up)
	ws := waitCondition(t, ns, first.Name, autov1alpha1.WorkspaceActive, metav1.ConditionFalse, workspace.ReasonIdle)
	if c := apimeta.FindStatusCondition(ws.Status.Conditions, autov1alpha1.WorkspaceActive); !strings.Contains(c.Message, "wait for a place") {
		t.Errorf("idle message %q: want it to say others wait", c.Message)
	}
	waitServing(t, ns, second.Name)
}

// TestFinalizerRemovedByHand deletes a Workspace whose finalizer was removed
// by hand: its local agent stops all the same, and gives its place up.
func TestFinalizerRemovedByHand(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createBackendSecret(t, ns)
	op := startOperator(t, ns, t.TempDir(), workspace.Options{IdleAfter: 10 * time.Minute},
		func(o *local.Options) { o.MaxAgents = 1 })
	ws := newWorkspace(t, ns, "orphan")
	if err := env.Client.Create(ctx(t), ws); err != nil {
		t.Fatal(err)
	}
	createUpdate(t, ns, "orphan-up", ws.Name)
	ws = waitServing(t, ns, ws.Name)
	pid := op.rt.PID(ns, ws.Name)

	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	if err := env.Client.Patch(ctx(t), ws, patch); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx(t), ws); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the orphaned agent to stop", func() (bool, string) { return !alive(pid), fmt.Sprint(pid) })
	if op.rt.Queued() != 0 {
		t.Errorf("Queued() = %d", op.rt.Queued())
	}
}
