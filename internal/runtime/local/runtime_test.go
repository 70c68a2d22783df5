package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/internal/agent/readset"
	"github.com/stackyard/stackyard/internal/proc"
	"github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/redact"
	"github.com/stackyard/stackyard/internal/runtime/local"
	"github.com/stackyard/stackyard/test/gitserver"
)

// program is a Pulumi YAML project without resources: it needs no
// provider, and an up reports its config back as outputs.
const program = `name: %s
runtime: yaml
config:
  greeting:
    type: string
outputs:
  greeting: ${greeting}
`

// localWorkspace returns a Workspace over a new program directory, with a
// file backend of its own and the passphrase read from a Secret.
func localWorkspace(t *testing.T, ns, name string) *autov1alpha1.Workspace {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte(fmt.Sprintf(program, name)), 0o644); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-passphrase", Namespace: ns},
		StringData: map[string]string{"passphrase": "pa55-" + name},
	}
	if err := testEnv(t).Client.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	return &autov1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: autov1alpha1.WorkspaceSpec{
			Local: &autov1alpha1.LocalSource{Dir: dir},
			Env: []corev1.EnvVar{
				{Name: "PULUMI_BACKEND_URL", Value: "file://" + t.TempDir()},
				{Name: "PULUMI_CONFIG_PASSPHRASE", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: secret.Name}, Key: "passphrase",
				}}},
			},
		},
	}
}

// client dials ws's agent.
func client(t *testing.T, rt *local.Runtime, ws *autov1alpha1.Workspace) agentpb.AutomationServiceClient {
	t.Helper()
	conn, err := rt.Dial(ctx(t), ws)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return agentpb.NewAutomationServiceClient(conn)
}

// ensureReady runs Ensure and fails unless the agent is ready.
func ensureReady(t *testing.T, rt *local.Runtime, ws *autov1alpha1.Workspace) {
	t.Helper()
	st, err := rt.Ensure(ctx(t), ws)
	if err != nil || !st.Ready || st.Address == "" || st.Instance == "" {
		t.Fatalf("Ensure = %+v, %v; want a ready agent", st, err)
	}
}

func TestLifecycle(t *testing.T) {
	ns := newNamespace(t)
	rt, exits := newRuntime(t, "")
	ws := localWorkspace(t, ns, "life")

	st, err := rt.Ensure(ctx(t), ws)
	if err != nil || !st.Ready || !strings.HasPrefix(st.Address, "127.0.0.1:") {
		t.Fatalf("Ensure = %+v, %v", st, err)
	}
	pid := rt.PID(ns, ws.Name)
	// The agent is the lean binary testenv builds beside stackyard.
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil || filepath.Base(exe) != local.LeanAgent {
		t.Errorf("the agent runs %q (%v), want %s", exe, err, local.LeanAgent)
	}
	// The agent is told which variables came from Secrets, to mask them.
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil || !slices.Contains(strings.Split(string(environ), "\x00"), redact.SecretEnvVar+"=PULUMI_CONFIG_PASSPHRASE") {
		t.Errorf("the agent's environment lacks %s=PULUMI_CONFIG_PASSPHRASE (%v)", redact.SecretEnvVar, err)
	}
	// ... and which version of the Secret its environment holds.
	var passphrase corev1.Secret
	if err := testEnv(t).Client.Get(ctx(t), types.NamespacedName{Namespace: ns, Name: ws.Name + "-passphrase"}, &passphrase); err != nil {
		t.Fatal(err)
	}
	if want := readset.EnvVar + "=Secret/" + passphrase.Name + "=" + passphrase.ResourceVersion; !slices.Contains(strings.Split(string(environ), "\x00"), want) {
		t.Errorf("the agent's environment lacks %s", want)
	}
	ws.Status.Address = st.Address
	if !rt.Running(ws) {
		t.Error("Running = false for the agent just started")
	}
	c := client(t, rt, ws)
	if v, err := c.PulumiVersion(ctx(t), &agentpb.PulumiVersionRequest{}); err != nil || v.GetVersion() == "" {
		t.Fatalf("PulumiVersion = %v, %v", v, err)
	}
	// Creating a stack needs the passphrase from the Secret.
	if _, err := c.SelectStack(ctx(t), &agentpb.SelectStackRequest{StackName: "dev", Create: true}); err != nil {
		t.Fatalf("SelectStack: %v", err)
	}

	// Ensure again: the same process, the same state.
	again, err := rt.Ensure(ctx(t), ws)
	if err != nil || again != st || rt.PID(ns, ws.Name) != pid {
		t.Fatalf("second Ensure = %+v (pid %d), %v; want %+v (pid %d)", again, rt.PID(ns, ws.Name), err, st, pid)
	}

	// An agent that dies is reported and started again by Ensure.
	_ = syscall.Kill(pid, syscall.SIGKILL)
	select {
	case key := <-exits:
		if key != ns+"/"+ws.Name {
			t.Errorf("exit reported for %s", key)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent's exit was not reported")
	}
	if rt.Running(ws) {
		t.Error("Running = true for an agent that was killed")
	}
	ensureReady(t, rt, ws)
	if rt.PID(ns, ws.Name) == pid {
		t.Fatal("the dead agent was not replaced")
	}
	pid = rt.PID(ns, ws.Name)

	// A changed environment restarts the agent and changes the instance.
	before, _ := rt.Ensure(ctx(t), ws)
	ws.Spec.Env = append(ws.Spec.Env, corev1.EnvVar{Name: "EXTRA", Value: "1"})
	after, err := rt.Ensure(ctx(t), ws)
	if err != nil || rt.PID(ns, ws.Name) == pid || after.Instance == before.Instance {
		t.Fatalf("after an env change: %+v, pid %d (was %d), %v", after, rt.PID(ns, ws.Name), pid, err)
	}
	pid = rt.PID(ns, ws.Name)

	// A Secret written restarts the agent, with the version it holds now
	// (the value stays: the stack's secrets are encrypted with it).
	stale := passphrase.ResourceVersion
	passphrase.Annotations = map[string]string{"written": "again"}
	if err := testEnv(t).Client.Update(ctx(t), &passphrase); err != nil {
		t.Fatal(err)
	}
	written, err := rt.Ensure(ctx(t), ws)
	if err != nil || rt.PID(ns, ws.Name) == pid || written.Instance == after.Instance {
		t.Fatalf("after a Secret write: %+v, pid %d (was %d), %v", written, rt.PID(ns, ws.Name), pid, err)
	}
	// The new agent (from the warm pool: its environment came with its
	// spec, not at exec) runs only with the version written: an up the
	// operator checked the old version for is refused before anything,
	// one checked at the new version goes on (to find no stack selected).
	ws.Status.Address = written.Address
	fresh := client(t, rt, ws)
	for version, want := range map[string]agenterr.Reason{
		stale: agenterr.ReadsChanged, passphrase.ResourceVersion: agenterr.NoStackSelected,
	} {
		checked := metadata.AppendToOutgoingContext(ctx(t), readset.Header, "Secret/"+passphrase.Name+"="+version)
		stream, err := fresh.Up(checked, &agentpb.UpRequest{})
		if err == nil {
			_, err = stream.Recv()
		}
		if got := agenterr.ReasonOf(err); got != want {
			t.Errorf("an up checked at version %s: %v (reason %s); want reason %s", version, err, got, want)
		}
	}
	after = written
	pid = rt.PID(ns, ws.Name)

	// Idle stops the process and keeps the state; Dial then waits.
	if err := rt.Idle(ctx(t), ws); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	var waiting *reconcile.Waiting
	if _, err := rt.Dial(ctx(t), ws); !errors.As(err, &waiting) || waiting.Reason != local.ReasonAgentNotRunning {
		t.Errorf("Dial of an idle workspace: %v, want Waiting %s", err, local.ReasonAgentNotRunning)
	}
	home := filepath.Join(rt.StateDir(ns, ws.Name), "home")
	if _, err := os.Stat(home); err != nil {
		t.Errorf("idle removed the state: %v", err)
	}
	resumed, err := rt.Ensure(ctx(t), ws)
	if err != nil || !resumed.Ready || resumed.Instance != after.Instance {
		t.Fatalf("Ensure after Idle = %+v, %v; want ready with instance %s", resumed, err, after.Instance)
	}
	c = client(t, rt, ws)
	if _, err := c.SelectStack(ctx(t), &agentpb.SelectStackRequest{StackName: "dev"}); err != nil {
		t.Errorf("the stack did not survive idling: %v", err)
	}

	// Delete stops it and removes the state directory.
	pid = rt.PID(ns, ws.Name)
	if err := rt.Delete(ctx(t), ws); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	if _, err := os.Stat(rt.StateDir(ns, ws.Name)); !os.IsNotExist(err) {
		t.Errorf("state directory after Delete: %v", err)
	}
}

func TestGitSource(t *testing.T) {
	ns := newNamespace(t)
	rt, _ := newRuntime(t, "")
	srv := gitserver.New(t)
	srv.SetBasicAuth("robot", "git-pa55word")
	repo := srv.CreateRepo("prog")
	first := repo.Commit("main", map[string]string{"infra/Pulumi.yaml": fmt.Sprintf(program, "first")})
	second := repo.Commit("main", map[string]string{"infra/Pulumi.yaml": fmt.Sprintf(program, "second")})
	creds := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: ns},
		StringData: map[string]string{"user": "robot", "password": "git-pa55word"},
	}
	if err := testEnv(t).Client.Create(context.Background(), creds); err != nil {
		t.Fatal(err)
	}
	sel := func(key string) *corev1.SecretKeySelector {
		return &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "git"}, Key: key}
	}
	ws := localWorkspace(t, ns, "gitws")
	ws.Spec.Local = nil
	ws.Spec.Git = &autov1alpha1.GitSource{URL: repo.URL, Ref: first, Dir: "infra",
		Auth: &autov1alpha1.GitAuth{Username: sel("user"), Password: sel("password")}}

	st, err := rt.Ensure(ctx(t), ws)
	if err != nil || !st.Ready || st.Revision != first {
		t.Fatalf("Ensure = %+v, %v; want revision %s", st, err, first)
	}
	info, err := client(t, rt, ws).Info(ctx(t), &agentpb.InfoRequest{})
	if err != nil || info.GetProject() != "first" {
		t.Fatalf("Info = %v, %v; want project first", info, err)
	}
	keep := filepath.Join(rt.StateDir(ns, ws.Name), "home", "keep")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(rt.StateDir(ns, ws.Name), ".init-credentials-*")); len(left) != 0 {
		t.Errorf("credential files left behind: %v", left)
	}

	// A new ref fetches again, restarts the agent and keeps PULUMI_HOME.
	ws.Spec.Git.Ref = "main"
	next, err := rt.Ensure(ctx(t), ws)
	if err != nil || next.Revision != second || next.Instance == st.Instance {
		t.Fatalf("Ensure after the ref changed = %+v, %v; want revision %s and a new instance", next, err, second)
	}
	if info, err := client(t, rt, ws).Info(ctx(t), &agentpb.InfoRequest{}); err != nil || info.GetProject() != "second" {
		t.Fatalf("Info = %v, %v; want project second", info, err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("PULUMI_HOME lost on re-fetch: %v", err)
	}
}

func TestFailures(t *testing.T) {
	ns := newNamespace(t)
	rt, _ := newRuntime(t, "")
	srv := gitserver.New(t)
	srv.SetBasicAuth("robot", "right")
	repo := srv.CreateRepo("prog")
	repo.Commit("main", map[string]string{"Pulumi.yaml": fmt.Sprintf(program, "p")})
	bad := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: ns}, StringData: map[string]string{"token": "wr0ng-t0ken-value"}}
	if err := testEnv(t).Client.Create(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	ref := func(name, key string, optional bool) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: &optional}}
	}

	cases := []struct {
		name    string
		mutate  func(ws *autov1alpha1.Workspace)
		stall   bool // else waiting
		reason  string
		message string
	}{
		{name: "wrong git token", stall: true, reason: autov1alpha1.WorkspaceReasonSourceFailed, message: "spec.git", mutate: func(ws *autov1alpha1.Workspace) {
			ws.Spec.Local = nil
			ws.Spec.Git = &autov1alpha1.GitSource{URL: repo.URL, Auth: &autov1alpha1.GitAuth{Token: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "bad"}, Key: "token"}}}
		}},
		{name: "missing local dir", stall: true, reason: autov1alpha1.WorkspaceReasonSourceFailed, message: "spec.local.dir", mutate: func(ws *autov1alpha1.Workspace) {
			ws.Spec.Local.Dir = "/nonexistent/stackyard-test"
		}},
		{name: "no source", stall: true, reason: autov1alpha1.WorkspaceReasonSourceFailed, message: "spec:", mutate: func(ws *autov1alpha1.Workspace) {
			ws.Spec.Local = nil
		}},
		{name: "missing secret", reason: local.ReasonEnvSourceMissing, message: "spec.env[2] (X)", mutate: func(ws *autov1alpha1.Workspace) {
			ws.Spec.Env = append(ws.Spec.Env, corev1.EnvVar{Name: "X", ValueFrom: ref("nope", "k", false)})
		}},
		{name: "missing key", reason: local.ReasonEnvSourceMissing, message: `key "k" not found`, mutate: func(ws *autov1alpha1.Workspace) {
			ws.Spec.Env = append(ws.Spec.Env, corev1.EnvVar{Name: "X", ValueFrom: ref("bad", "k", false)})
		}},
		{name: "field ref", stall: true, reason: local.ReasonEnvUnsupported, message: "spec.env[2]", mutate: func(ws *autov1alpha1.Workspace) {
			ws.Spec.Env = append(ws.Spec.Env, corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := localWorkspace(t, ns, fmt.Sprintf("fail%d", i))
			tc.mutate(ws)
			st, err := rt.Ensure(ctx(t), ws)
			if st.Ready || err == nil {
				t.Fatalf("Ensure = %+v, %v; want an error", st, err)
			}
			var stalling *reconcile.Stalling
			isStall := errors.As(err, &stalling)
			if isStall != tc.stall || reconcile.Reason(err) != tc.reason || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("err = %v (reason %s, stalling %v); want reason %s, stalling %v, naming %q",
					err, reconcile.Reason(err), isStall, tc.reason, tc.stall, tc.message)
			}
			if strings.Contains(err.Error(), "wr0ng-t0ken-value") {
				t.Errorf("the error leaks the token: %v", err)
			}
			if rt.PID(ns, ws.Name) != 0 {
				t.Error("an agent runs for a workspace that cannot be set up")
			}
		})
	}

	t.Run("optional secret", func(t *testing.T) {
		ws := localWorkspace(t, ns, "optional")
		ws.Spec.Env = append(ws.Spec.Env, corev1.EnvVar{Name: "X", ValueFrom: ref("nope", "k", true)})
		ensureReady(t, rt, ws)
	})
}

// TestOrphanAndConcurrency starts several workspaces at once, then hands
// the root to a second runtime as if the first had crashed without
// stopping its agents: the second stops the orphans before starting its
// own.
func TestOrphanAndConcurrency(t *testing.T) {
	ns := newNamespace(t)
	root := t.TempDir()
	first, _ := newRuntime(t, root)
	var wss []*autov1alpha1.Workspace
	for i := 0; i < 3; i++ {
		wss = append(wss, localWorkspace(t, ns, fmt.Sprintf("many%d", i)))
	}
	var wg sync.WaitGroup
	errs := make([]error, len(wss))
	for i, ws := range wss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = first.Ensure(ctx(t), ws)
		}()
	}
	wg.Wait()
	old := map[string]int{}
	for i, ws := range wss {
		if errs[i] != nil {
			t.Fatalf("Ensure %s: %v", ws.Name, errs[i])
		}
		old[ws.Name] = first.PID(ns, ws.Name)
	}

	second, _ := newRuntime(t, root)
	ensureReady(t, second, wss[0])
	waitGone(t, old[wss[0].Name])
	if second.PID(ns, wss[0].Name) == old[wss[0].Name] {
		t.Fatal("the orphan was adopted instead of replaced")
	}
	// Idle reaps an orphan too.
	if err := second.Idle(ctx(t), wss[1]); err != nil {
		t.Fatal(err)
	}
	waitGone(t, old[wss[1].Name])

	// Closing a runtime stops everything it runs.
	first.Close()
	waitGone(t, old[wss[2].Name])
	pid := second.PID(ns, wss[0].Name)
	second.Close()
	waitGone(t, pid)
	if _, err := second.Ensure(ctx(t), wss[0]); err == nil {
		t.Error("a closed runtime started an agent")
	}
}

// TestMaxAgents runs two Workspaces with room for one agent: the second
// waits, is woken when the first idles, and then runs.
func TestMaxAgents(t *testing.T) {
	ns := newNamespace(t)
	rt, notified := newRuntime(t, "", func(o *local.Options) { o.MaxAgents = 1 })
	first, second := localWorkspace(t, ns, "first"), localWorkspace(t, ns, "second")
	waitNotified := func(name string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case key := <-notified:
				if key == ns+"/"+name {
					return
				}
			case <-deadline:
				t.Fatalf("%s was not woken", name)
			}
		}
	}

	ensureReady(t, rt, first)
	st, err := rt.Ensure(ctx(t), second)
	if err != nil || st.Ready || !strings.Contains(st.Message, "queued") || rt.PID(ns, second.Name) != 0 {
		t.Fatalf("Ensure of the second = %+v (pid %d), %v; want queued", st, rt.PID(ns, second.Name), err)
	}
	if rt.Queued() != 1 {
		t.Errorf("Queued() = %d, want 1", rt.Queued())
	}
	waitNotified(first.Name) // asked to give its place up if idle

	pid := rt.PID(ns, first.Name)
	if err := rt.Idle(ctx(t), first); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	waitNotified(second.Name)
	ensureReady(t, rt, second)
	if rt.Queued() != 0 {
		t.Errorf("Queued() = %d, want 0", rt.Queued())
	}

	// Now the first waits, until the second is deleted.
	if st, err := rt.Ensure(ctx(t), first); err != nil || st.Ready {
		t.Fatalf("Ensure of the first again = %+v, %v; want queued", st, err)
	}
	if err := rt.Delete(ctx(t), second); err != nil {
		t.Fatal(err)
	}
	waitNotified(first.Name)
	ensureReady(t, rt, first)
}

// TestServeFallback: with no lean agent beside the stackyard binary, the
// runtime runs `stackyard agent serve`, which serves the same API.
func TestServeFallback(t *testing.T) {
	ns := newNamespace(t)
	alone := filepath.Join(t.TempDir(), "stackyard")
	if err := os.Symlink(stackyardBin, alone); err != nil {
		t.Fatal(err)
	}
	rt, _ := newRuntime(t, "", func(o *local.Options) { o.AgentPath = alone })
	ws := localWorkspace(t, ns, "fallback")
	st, err := rt.Ensure(ctx(t), ws)
	if err != nil || !st.Ready {
		t.Fatalf("Ensure = %+v, %v; want a ready agent", st, err)
	}
	pid := rt.PID(ns, ws.Name)
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil || filepath.Base(exe) != "stackyard" {
		t.Errorf("the agent runs %q (%v), want stackyard", exe, err)
	}
	if args := proc.Cmdline(pid); len(args) < 3 || args[1] != "agent" || args[2] != "serve" {
		t.Errorf("the agent's command line is %q, want stackyard agent serve", args)
	}
	ws.Status.Address = st.Address
	if v, err := client(t, rt, ws).PulumiVersion(ctx(t), &agentpb.PulumiVersionRequest{}); err != nil || v.GetVersion() == "" {
		t.Fatalf("PulumiVersion = %v, %v", v, err)
	}
}
