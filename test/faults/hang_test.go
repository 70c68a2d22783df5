package faults

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/test/provider"
	"github.com/stackyard/stackyard/test/testenv"
)

// hangTimeout is the customTimeouts of the hanging resource.
const hangTimeout = 2 * time.Second

// hangProgram is a project whose one resource sleeps for seconds, with a
// custom create and update timeout of hangTimeout: the only timeout a
// Stack can put on an operation is its program's, since neither the Stack
// nor the Update API has one (see docs/reliability.md).
func hangProgram(seconds int) string {
	return fmt.Sprintf(`name: %s
runtime: yaml
resources:
  hang:
    type: stackyardtest:index:Sleep
    properties:
      seconds: %d
    options:
      customTimeouts:
        create: %s
        update: %s
`, project, seconds, hangTimeout, hangTimeout)
}

// testHang deploys a program that hangs for an hour behind a 2 s custom
// timeout: the update must fail saying it timed out, the Stack must report
// the failure (and stall after its consecutive failures, not stay in
// progress), no process of the runs may be left in the project directory,
// and a fixed program must deploy without anything else done. With
// StubbornHang, a provider that ignores its timeout and cancellation is
// ended by deleting its Update.
func (s *suite) testHang(t *testing.T) {
	seeded(t) // nothing random; the seed line keeps the logs alike
	ns, journal := s.newNamespace(t, "hang-")
	name := ns + "-0"
	repo := s.git.CreateRepo(name)
	repo.Commit("main", map[string]string{"Pulumi.yaml": hangProgram(3600)})
	if err := s.client.Create(context.Background(), s.stackOf(ns, name, repo.URL, "v0", journal)); err != nil {
		fatal(t, err)
	}

	var st *pulumiv1.Stack
	waitFor(t, 3*time.Minute, "the hanging Stack to stall on its failed updates", func() string {
		st = s.getStack(t, ns, name)
		if c := condition(st, sreconcile.StalledCondition); c == nil || c.Status != metav1.ConditionTrue {
			return "not stalled: " + describe(st)
		}
		return ""
	})
	lu := st.Status.LastUpdate
	if lu == nil || lu.State != shared.FailedStackStateMessage || !strings.Contains(lu.Message, "timed out after") {
		fatalf(t, "the last update does not say it timed out: %s", describe(st))
	}
	if ready := condition(st, sreconcile.ReadyCondition); ready == nil || ready.Status != metav1.ConditionFalse {
		errorf(t, "a Stack whose updates time out is Ready: %s", describe(st))
	}
	if st.Status.CurrentUpdate != nil {
		errorf(t, "a stalled Stack still has an update in progress: %s", describe(st))
	}
	t.Logf("stalled: %s", lu.Message)
	projectDir := filepath.Join(s.workspaceDir(ns, name), "source")
	waitFor(t, 30*time.Second, "no process left in the project directory", func() string {
		if left := testenv.ProcessesIn(projectDir); len(left) > 0 {
			return fmt.Sprintf("processes %v still run in %s", left, projectDir)
		}
		return ""
	})

	// The fix: a program that does not hang, and a reconcile request so
	// the branch is read now rather than at the next poll.
	fixed := repo.Commit("main", map[string]string{"Pulumi.yaml": hangProgram(0)})
	s.requestReconcile(t, ns, name, "fixed")
	s.waitConverged(t, ns, 3*time.Minute, name)
	if got := s.getStack(t, ns, name).Status.LastUpdate.LastSuccessfulCommit; got != fixed {
		errorf(t, "converged at commit %s, want the fix %s", got, fixed)
	}
	t.Log("RESULT hang: the custom timeout failed the update, the Stack stalled, nothing was left running, the fix deployed")

	if s.params.StubbornHang {
		s.testStubbornHang(t)
	}
}

// testStubbornHang runs the hanging program with a provider that ignores
// its timeout and cancellation (provider.StubbornEnv). No timeout of
// stackyard's ends it: the Update stays in progress. Deleting the Update,
// with the program fixed, cancels the run; after the agent's grace period
// its process tree is killed, and the Stack deploys the fix.
func (s *suite) testStubbornHang(t *testing.T) {
	ns, journal := s.newNamespace(t, "stubborn-")
	name := ns + "-0"
	repo := s.git.CreateRepo(name)
	repo.Commit("main", map[string]string{"Pulumi.yaml": hangProgram(3600)})
	stack := s.stackOf(ns, name, repo.URL, "v0", journal)
	stack.Spec.EnvRefs[provider.StubbornEnv] = shared.NewLiteralResourceRef("1")
	if err := s.client.Create(context.Background(), stack); err != nil {
		fatal(t, err)
	}
	var running []string
	waitFor(t, 2*time.Minute, "the stubborn update to run", func() string {
		if running = s.runningUpdates(t, ns); len(running) == 0 {
			return "no Update in progress"
		}
		return ""
	})
	// Well past the resource's timeout, the update still runs.
	time.Sleep(5 * hangTimeout)
	if still := s.runningUpdates(t, ns); len(still) == 1 && still[0] == running[0] {
		t.Logf("%s after it started, Update %s is still in progress: nothing bounds an operation", 5*hangTimeout, running[0])
	} else {
		t.Logf("the stubborn update %s ended by itself: running now %v", running[0], still)
	}

	fixed := repo.Commit("main", map[string]string{"Pulumi.yaml": hangProgram(0)})
	s.requestReconcile(t, ns, name, "fixed")
	deleted := time.Now()
	upd := &autov1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: running[0]}}
	if err := s.client.Delete(context.Background(), upd); err != nil {
		fatal(t, err)
	}
	projectDir := filepath.Join(s.workspaceDir(ns, name), "source")
	waitFor(t, 2*time.Minute, "the deleted Update to go, and its processes with it", func() string {
		err := s.client.Get(context.Background(), client.ObjectKeyFromObject(upd), upd)
		if err == nil {
			return fmt.Sprintf("Update %s still exists: %s", upd.Name, upd.Status.Message)
		}
		if left := testenv.ProcessesOf(projectDir, "pulumi-resource-"+provider.Name); len(left) > 0 {
			return fmt.Sprintf("the provider %v still runs", left)
		}
		return ""
	})
	t.Logf("the deleted Update and its provider were gone %s after the delete", fmtDuration(time.Since(deleted)))
	s.waitConverged(t, ns, 3*time.Minute, name)
	if got := s.getStack(t, ns, name).Status.LastUpdate.LastSuccessfulCommit; got != fixed {
		errorf(t, "converged at commit %s, want the fix %s", got, fixed)
	}
	waitFor(t, 30*time.Second, "no process left in the project directory", func() string {
		if left := testenv.ProcessesIn(projectDir); len(left) > 0 {
			return fmt.Sprintf("processes %v still run in %s", left, projectDir)
		}
		return ""
	})
	t.Log("RESULT hang (stubborn): the update ran past its timeout until its Update was deleted; then its tree was killed and the fix deployed")
}

// requestReconcile sets the Stack's reconcile-request annotation to value,
// as `kubectl annotate` would.
func (s *suite) requestReconcile(t *testing.T, ns, name, value string) {
	t.Helper()
	st := s.getStack(t, ns, name)
	patch := client.MergeFrom(st.DeepCopy())
	if st.Annotations == nil {
		st.Annotations = map[string]string{}
	}
	st.Annotations[shared.ReconcileRequestAnnotation] = value
	if err := s.client.Patch(context.Background(), st, patch); err != nil {
		fatal(t, err)
	}
}
