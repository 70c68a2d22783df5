package local_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/stackyard/stackyard/internal/agent/agentpb"
	"github.com/stackyard/stackyard/test/provider"
	"github.com/stackyard/stackyard/test/testenv"
)

// napProgram is a project whose one resource takes seconds to create.
func napProgram(seconds int) []byte {
	return fmt.Appendf(nil, "name: napping\nruntime: yaml\nresources:\n  nap:\n"+
		"    type: stackyardtest:index:Sleep\n    properties:\n      seconds: %d\n", seconds)
}

// TestNewOperatorEndsPredecessorsProviders stands for an operator killed
// in the middle of an update: its agent dies with it (parent-death
// signal), and so does the agent's CLI, but the provider inside Create
// does not. A new operator's runtime over the same root must end that
// provider before it starts an agent, so that the retried update never
// runs beside it, and the retry must leave nothing running either.
func TestNewOperatorEndsPredecessorsProviders(t *testing.T) {
	const providerExe = "pulumi-resource-" + provider.Name
	if err := testenv.RequireBinaries(providerExe); err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t)
	root := t.TempDir()
	first, _ := newRuntime(t, root)
	ws := localWorkspace(t, ns, "leftovers")
	dir := ws.Spec.Local.Dir
	if err := os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), napProgram(600), 0o644); err != nil {
		t.Fatal(err)
	}
	// The provider then stays when its engine dies, as real ones do.
	ws.Spec.Env = append(ws.Spec.Env, corev1.EnvVar{Name: provider.StubbornEnv, Value: "1"})
	t.Cleanup(func() {
		for _, pid := range testenv.ProcessesIn(dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	ensureReady(t, first, ws)
	c := client(t, first, ws)
	if _, err := c.SelectStack(ctx(t), &agentpb.SelectStackRequest{StackName: "dev", Create: true}); err != nil {
		t.Fatalf("SelectStack: %v", err)
	}
	upCtx, cancelUp := context.WithCancel(ctx(t))
	defer cancelUp()
	stream, err := c.Up(upCtx, &agentpb.UpRequest{})
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				return
			}
		}
	}()
	backend := strings.TrimPrefix(ws.Spec.Env[0].Value, "file://")
	const napCreate = "urn:pulumi:dev::napping::stackyardtest:index:Sleep::nap creating"
	if !poll(60*time.Second, func() bool {
		return slices.Contains(testenv.PendingOperations(backend, "napping", "dev"), napCreate)
	}) {
		t.Fatal("the state never recorded the create in flight")
	}

	if err := syscall.Kill(first.PID(ns, ws.Name), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !poll(30*time.Second, func() bool { return len(testenv.ProcessesOf(dir, "pulumi")) == 0 }) {
		t.Fatal("the CLI outlived its killed agent")
	}
	providers := testenv.ProcessesOf(dir, providerExe)
	if len(providers) == 0 {
		t.Fatal("no provider outlived the killed agent, nothing to test")
	}
	t.Logf("left running by the killed agent: %v", testenv.ProcessesIn(dir))

	second, _ := newRuntime(t, root)
	ensureReady(t, second, ws)
	if left := testenv.ProcessesIn(dir); len(left) > 0 {
		t.Fatalf("the new operator's agent runs beside its predecessor's processes %v", left)
	}

	c = client(t, second, ws)
	if _, err := c.SelectStack(ctx(t), &agentpb.SelectStackRequest{StackName: "dev"}); err != nil {
		t.Fatalf("SelectStack: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), napProgram(1), 0o644); err != nil {
		t.Fatal(err)
	}
	retry, err := c.Up(ctx(t), &agentpb.UpRequest{})
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	var res *agentpb.Result
	for {
		msg, err := retry.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the retried Up: %v", err)
		}
		if r := msg.GetResult(); r != nil {
			res = r
		}
	}
	if res.GetSummary().GetResult() != "succeeded" || len(res.GetRecovery().GetClearedPendingOperations()) != 1 {
		t.Errorf("the retried Up = %v; want a success that cleared the interrupted create", res)
	}
	if left := testenv.ProcessesIn(dir); len(left) > 0 {
		t.Errorf("processes %v still run after the retried Up", left)
	}
}

// poll calls cond until it holds or d has passed.
func poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}
