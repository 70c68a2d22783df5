package stack_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/controller/stack"
	"github.com/stackyard/stackyard/internal/stackrun"
	"github.com/stackyard/stackyard/test/testenv"
)

// fileProgram is a Pulumi YAML project that writes content to target after
// sleeping for seconds (zero: no sleep).
func fileProgram(project, target, content string, seconds int) string {
	return fmt.Sprintf(`name: %s
runtime: yaml
resources:
  wait:
    type: stackyardtest:index:Sleep
    properties:
      seconds: %d
  page:
    type: stackyardtest:index:File
    properties:
      path: %s
      content: %s
    options:
      dependsOn:
        - ${wait}
`, project, seconds, target, content)
}

// TestPrerequisites pins down spec.prerequisites: a Stack waits, with
// Reconciling reason PrerequisiteNotSatisfied and no Update, while its
// prerequisite is missing and while it has not succeeded; it runs once the
// prerequisite is Ready; and with requirement.succeededWithinDuration it
// asks a prerequisite that succeeded too long ago to run again (through
// the prerequisite's reconciliation-request annotation) and runs only after
// that run.
func TestPrerequisites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	dir := testenv.LiveDir(t)
	netFile := filepath.Join(dir, "network.txt")
	appFile := filepath.Join(dir, "app.txt")

	app := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: shared.StackSpec{
			Stack:         "dev",
			Backend:       backendURL(t, dir),
			GitSource:     programSource(t, "app", fileProgram("app", appFile, "app", 0)),
			Prerequisites: []shared.PrerequisiteRef{{Name: "network"}},
		},
	}
	g.Expect(env.Client.Create(ctx, app)).To(Succeed())
	waitStack(t, ns, "app", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		waitingFor(g, s, `spec.prerequisites[0]: Stack "network" not found`)
	})
	g.Expect(updatesOf(g, ns, "app")).To(BeEmpty(), "no update while the prerequisite is missing")

	// The prerequisite exists but its first update takes a few seconds.
	network := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "network", Namespace: ns},
		Spec: shared.StackSpec{
			Stack:     "dev",
			Backend:   backendURL(t, dir),
			GitSource: programSource(t, "network", fileProgram("network", netFile, "network", 5)),
		},
	}
	g.Expect(env.Client.Create(ctx, network)).To(Succeed())
	waitStack(t, ns, "app", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		waitingFor(g, s, `spec.prerequisites[0]: Stack "network" has not succeeded yet`)
	})
	g.Expect(getStack(g, ns, "network").Status.LastUpdate).To(BeNil(), "network is still in its first update")
	g.Expect(updatesOf(g, ns, "app")).To(BeEmpty(), "no update while the prerequisite has not succeeded")

	net := waitStack(t, ns, "network", opTimeout, ready)
	s := waitStack(t, ns, "app", opTimeout, ready)
	g.Expect(readFile(g, appFile)).To(Equal("app"))
	g.Expect(startOf(s)).To(BeTemporally(">=", endOf(net).Time), "app ran after network succeeded")

	// Ask for a recent success once network's is older than a second (app's
	// own update can end within a second of network's), so app asks
	// network to run again and waits for that run.
	firstNetRun := net.Status.LastUpdate.Name
	time.Sleep(time.Until(net.Status.LastUpdate.LastResyncTime.Add(1500 * time.Millisecond)))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
	s.Spec.Prerequisites[0].Requirement = &shared.RequirementSpec{SucceededWithinDuration: &metav1.Duration{Duration: time.Second}}
	g.Expect(env.Client.Update(ctx, s)).To(Succeed())

	var request string
	g.Eventually(func(g Gomega) {
		n := getStack(g, ns, "network")
		request = n.Annotations[shared.ReconcileRequestAnnotation]
		g.Expect(request).To(HavePrefix("prerequisite-of-app-"))
	}, opTimeout, 100*time.Millisecond).Should(Succeed(), "app never asked network to run again")

	net = waitStack(t, ns, "network", opTimeout, func(g Gomega, n *pulumiv1.Stack) {
		ready(g, n)
		g.Expect(n.Status.LastUpdate.Name).NotTo(Equal(firstNetRun))
		g.Expect(n.Status.ObservedReconcileRequest).To(HavePrefix("prerequisite-of-app-"))
	})
	g.Expect(net.Status.History[0].Trigger).To(Equal(string(stack.TriggerReconcileRequest)),
		"network's last run was the one app asked for")
	s = waitStack(t, ns, "app", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		ready(g, s)
		g.Expect(s.Status.LastUpdate.Generation).To(Equal(s.Generation))
	})
	g.Expect(startOf(s)).To(BeTemporally(">=", endOf(net).Time), "app ran again only after network's requested run")
}

// waitingFor checks that s waits for a prerequisite with the given message.
func waitingFor(g Gomega, s *pulumiv1.Stack, message string) {
	c := findCondition(s, "Reconciling")
	g.Expect(c).NotTo(BeNil(), "no Reconciling condition")
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(c.Reason).To(Equal(pulumiv1.ReconcilingPrerequisiteNotSatisfiedReason))
	g.Expect(c.Message).To(ContainSubstring(message))
	g.Expect(findCondition(s, "Ready").Status).To(Equal(metav1.ConditionFalse))
}

// updatesOf lists the names of the Updates made for the Stack name.
func updatesOf(g Gomega, ns, name string) []string {
	var list autov1alpha1.UpdateList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns),
		client.MatchingLabels{stackrun.StackNameLabel: name})).To(Succeed())
	var names []string
	for _, u := range list.Items {
		names = append(names, u.Name)
	}
	return names
}

// startOf is when the Stack's last recorded update started.
func startOf(s *pulumiv1.Stack) time.Time {
	return s.Status.History[0].StartTime.Time
}

// endOf is when the Stack's last recorded update ended.
func endOf(s *pulumiv1.Stack) metav1.Time {
	return s.Status.History[0].EndTime
}
