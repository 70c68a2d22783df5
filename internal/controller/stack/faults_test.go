package stack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/controller/update"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/runtime/local"
	"github.com/stackyard/stackyard/test/argocd"
	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/testenv"
)

// TestAgentKilledMidUpdate kills a Workspace's agent with SIGKILL while its
// update runs, the way a node failure or an OOM kill ends it: the pulumi
// CLI dies with it and leaves the stack's lock and a pending create in the
// state. The Update ends Failed/Interrupted without counting as a failure;
// the Workspace starts a new agent; the retry clears the dead holder's lock
// and the pending operation, and the Stack ends Ready with the program
// deployed and no lock left.
func TestAgentKilledMidUpdate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, target := newFileStack(t, "victim", func(target string) string { return slowProgram(target, 8) })
	ns, dir := s.Namespace, filepath.Dir(target)
	dumpLogsOnFailure(t, ns)
	s.Spec.RetryMaxBackoffDurationSeconds = 1
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())

	running := waitRunningUpdate(t, ns, "victim", nil)
	// The CLI holds the lock from the start of the update to its end; the
	// engine records the create of the slow resource as pending once it
	// begins it, and it stays pending for seconds. (The stack resource's
	// and the provider's creates are pending for an instant too: a kill
	// that follows one of those could land once it has ended, leaving
	// nothing pending.)
	g.Eventually(func() []string { return stateLocks(t, dir) }, opTimeout, 100*time.Millisecond).ShouldNot(BeEmpty())
	g.Eventually(func() bool { return statePendingCreate(t, dir, "stackyardtest:index:Sleep") }, opTimeout, 100*time.Millisecond).Should(BeTrue())
	pid := agentPID(t, ns, "victim")
	g.Expect(pid).NotTo(BeZero(), "no agent process found")
	g.Expect(syscall.Kill(pid, syscall.SIGKILL)).To(Succeed())

	var upd autov1alpha1.Update
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: running}, &upd)).To(Succeed())
		g.Expect(upd.Status.IsComplete()).To(BeTrue())
	}, opTimeout, 250*time.Millisecond).Should(Succeed())
	failed := apimeta.FindStatusCondition(upd.Status.Conditions, autov1alpha1.UpdateConditionTypeFailed)
	g.Expect(failed).NotTo(BeNil())
	g.Expect(failed.Reason).To(Equal(autov1alpha1.UpdateReasonInterrupted), upd.Status.Message)
	// What the killed CLI left (its lock, the pending create) is not read
	// here: the retry starts a second after the interruption, and its
	// agent may already have cleared both. The retry's Recovered event
	// below names what it cleared, which only the killed CLI can have left.

	s = waitStack(t, ns, "victim", 2*opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		currentUpdateExists(g, s)
		ready(g, s)
	})
	g.Expect(readFile(g, target)).To(Equal("after the wait"))
	g.Expect(s.Status.LastUpdate.Failures).To(BeZero())
	g.Expect(s.Status.LastUpdate.Name).NotTo(Equal(running))
	g.Expect(stateLocks(t, dir)).To(BeEmpty(), "the dead holder's lock was not cleared")

	// The retries say what the agent repaired first: the lock, and the
	// pending create, which can stand for an unmanaged resource. On a
	// loaded machine a retry can itself be interrupted (its agent
	// restarted under it), even while it clears the pending create, and
	// leave a lock of its own, which the next retry clears: the repairs
	// are read from every retry, each saying what it found or was
	// clearing when it was interrupted.
	g.Eventually(func(g Gomega) {
		var events eventsv1.EventList
		g.Expect(env.Client.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, e := range events.Items {
			if e.Regarding.Kind == "Update" && e.Regarding.Name != running && e.Reason == update.EventRecovered {
				g.Expect(e.Type).To(Equal(corev1.EventTypeWarning))
				notes = append(notes, e.Note)
			}
		}
		g.Expect(notes).NotTo(BeEmpty())
		g.Expect(strings.Join(notes, "\n")).To(And(ContainSubstring("stale lock"), ContainSubstring("is not running"),
			ContainSubstring("creating urn:pulumi:"), ContainSubstring("no longer managed")))
	}, opTimeout, 250*time.Millisecond).Should(Succeed())
}

// dumpLogsOnFailure prints, when t fails, the operator's log lines (its
// agents' included) that name namespace ns: the flake this test once had
// could not be explained from its assertion alone.
func dumpLogsOnFailure(t *testing.T, ns string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var lines []string
		for line := range strings.Lines(operatorLogs.String()) {
			if strings.Contains(line, ns) {
				lines = append(lines, line)
			}
		}
		if len(lines) > 400 {
			lines = lines[len(lines)-400:]
		}
		t.Logf("the operator's log lines about namespace %s (the last %d):\n%s", ns, len(lines), strings.Join(lines, ""))
	})
}

// statePendingCreate reports whether the checkpoint of the file:// backend
// under dir holds a pending create of a resource of type typ.
func statePendingCreate(t *testing.T, dir, typ string) bool {
	t.Helper()
	found := false
	root := filepath.Join(dir, "state", ".pulumi", "stacks")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var state struct {
			Checkpoint struct {
				Latest struct {
					Pending []struct {
						Type     string `json:"type"`
						Resource struct {
							Type string `json:"type"`
						} `json:"resource"`
					} `json:"pending_operations"`
				} `json:"latest"`
			} `json:"checkpoint"`
		}
		if err := json.Unmarshal(data, &state); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, op := range state.Checkpoint.Latest.Pending {
			found = found || (op.Type == "creating" && op.Resource.Type == typ)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// stateLocks lists the lock files of the file:// backend under dir.
func stateLocks(t *testing.T, dir string) []string {
	t.Helper()
	var locks []string
	root := filepath.Join(dir, "state", ".pulumi", "locks")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".json") {
			locks = append(locks, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return locks
}

// agentPID finds the local runtime's agent process of the Workspace
// ns/name by its command line, which names the workspace's directory.
func agentPID(t *testing.T, ns, name string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	marker := []byte(string(filepath.Separator) + filepath.Join("workspaces", ns, name) + string(filepath.Separator))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := bytes.Split(cmdline, []byte{0})
		// The agents of this suite are the lean binary testenv builds.
		if len(args) > 1 && filepath.Base(string(args[0])) == local.LeanAgent && string(args[1]) == "serve" && bytes.Contains(cmdline, marker) {
			return pid
		}
	}
	return 0
}

// TestGitHostOutage makes the git host answer 503 while a Stack has a new
// commit to pick up: the Stack says it is retrying (Reconciling, not
// Stalled; Argo CD sees Progressing, not Degraded) and deploys the commit
// once the host is back, without anyone touching it.
func TestGitHostOutage(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	dir := testenv.LiveDir(t)
	target := filepath.Join(dir, "page.txt")
	srv := gitserver.New(t)
	repo := srv.CreateRepo("flaky")
	repo.Commit("main", map[string]string{"Pulumi.yaml": fileProgram("flaky", target, "one", 0)})
	s := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "flaky", Namespace: ns},
		Spec: shared.StackSpec{
			Stack:     "dev",
			Backend:   backendURL(t, dir),
			GitSource: &shared.GitSource{ProjectRepo: repo.URL, Branch: "main"},
		},
	}
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	s = waitStack(t, ns, "flaky", opTimeout, ready)

	srv.SetOutage(true)
	second := repo.Commit("main", map[string]string{"Pulumi.yaml": fileProgram("flaky", target, "two", 0)})
	s.Annotations = map[string]string{shared.ReconcileRequestAnnotation: "during-outage"}
	g.Expect(env.Client.Update(ctx, s)).To(Succeed())
	s = waitStack(t, ns, "flaky", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		c := findCondition(s, sreconcile.ReconcilingCondition)
		g.Expect(c).NotTo(BeNil(), "not reconciling")
		g.Expect(c.Message).To(ContainSubstring("503"))
	})
	g.Expect(findCondition(s, sreconcile.StalledCondition)).To(BeNil(), "an outage is not a reason to stall")
	health, err := argocd.StackHealth(s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(health.Status).To(Equal("Progressing"), health.Message)

	srv.SetOutage(false)
	waitStack(t, ns, "flaky", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		ready(g, s)
		g.Expect(s.Status.LastUpdate.LastSuccessfulCommit).To(Equal(second))
	})
	g.Expect(readFile(g, target)).To(Equal("two"))
}
