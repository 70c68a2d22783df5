package stack_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/shard"
	"github.com/stackyard/stackyard/internal/stackrun"
)

// delayProgram sleeps for as many seconds as its config says, on create and
// on every change of the number: a new delay makes an update that stays in
// flight that long.
const delayProgram = `name: moving
runtime: yaml
config:
  delay:
    type: integer
resources:
  wait:
    type: stackyardtest:index:Sleep
    properties:
      seconds: ${delay}
outputs:
  delay: ${delay}
`

// runShards replaces the suite's operator, for the test, with an
// installation of two shards: the default shard, told of shard blue, and
// shard blue, each with its own state directory (and so its own local
// agents). It returns blue's state directory and what stops the default
// shard (for good: the test's end does nothing more).
func runShards(t *testing.T) (blueState string, stopDefault func()) {
	t.Helper()
	stopOperator()
	t.Cleanup(func() {
		if err := startOperator(); err != nil {
			t.Errorf("starting the suite's operator again: %v", err)
		}
	})
	def, err := shard.New("", []string{"blue"})
	if err != nil {
		t.Fatal(err)
	}
	blue, err := shard.New("blue", []string{"blue"})
	if err != nil {
		t.Fatal(err)
	}
	stop, err := launchOperator(t.TempDir(), "0", def)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stopDefault = func() { once.Do(stop) }
	t.Cleanup(stopDefault)
	blueState = t.TempDir()
	stopBlue, err := launchOperator(blueState, "0", blue)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopBlue)
	return blueState, stopDefault
}

// TestShardHandover moves a Stack between two shards, once while an update
// runs, and checks that every update runs exactly once, in the shard the
// Stack's label names: the move starts no update of its own, the shard the
// Stack joins waits for the update the other shard runs and records its
// result, and only then takes the Workspace over; the next update runs in
// the new shard, with the new shard's agent; moving back works the same
// way.
func TestShardHandover(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	blueState, _ := runShards(t)

	s, _ := newFileStack(t, "moving", func(string) string { return delayProgram })
	ns := s.Namespace
	s.Spec.Config = delay(0)
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	first := waitSucceeded(t, ns, "moving", "")
	g.Expect(shardLabels(g, ns, "moving")).To(Equal(map[string]string{"Workspace": "", first: ""}),
		"the unlabelled Stack's Workspace and Update belong to the default shard")

	// An update that takes a while, started by the default shard; the
	// Stack moves to blue while it runs.
	setDelay(g, ns, 6)
	running := waitRunningUpdate(t, ns, "moving", []string{first})
	label(g, ns, "moving", "blue")
	waitStack(t, ns, "moving", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		g.Expect(conditionMessage(s, "Reconciling")).To(ContainSubstring("update " + running + " runs in shard default, which this Stack left"))
	})
	second := waitSucceeded(t, ns, "moving", first)
	g.Expect(second).To(Equal(running), "the new shard recorded an update other than the one in flight")
	g.Eventually(func(g Gomega) {
		g.Expect(shardLabels(g, ns, "moving")).To(Equal(map[string]string{"Workspace": "blue", first: "", running: ""}))
	}, opTimeout, pollInterval).Should(Succeed(), "the Workspace was not handed over, or the move started an update")

	// The next update is blue's, on blue's own agent.
	setDelay(g, ns, 1)
	third := waitSucceeded(t, ns, "moving", second)
	g.Expect(shardLabels(g, ns, "moving")).To(Equal(map[string]string{"Workspace": "blue", first: "", running: "", third: "blue"}))
	_, err := os.Stat(filepath.Join(blueState, "workspaces", ns))
	g.Expect(err).NotTo(HaveOccurred(), "shard blue ran no agent for the Stack")

	// Back to the default shard, at rest this time: no update, and the
	// next one is the default shard's.
	label(g, ns, "moving", "")
	g.Eventually(func(g Gomega) {
		g.Expect(shardLabels(g, ns, "moving")).To(HaveKeyWithValue("Workspace", ""))
	}, opTimeout, pollInterval).Should(Succeed(), "the default shard did not take the Workspace back")
	g.Expect(shardLabels(g, ns, "moving")).To(HaveLen(4), "moving back started an update")
	setDelay(g, ns, 0)
	fourth := waitSucceeded(t, ns, "moving", third)
	g.Expect(shardLabels(g, ns, "moving")).To(HaveKeyWithValue(fourth, ""))
	g.Expect(shardLabels(g, ns, "moving")).To(HaveLen(5))
}

// TestShardHandoverWaitsForUnseenUpdates covers the moment a move can meet
// an Update the Stack's status does not name yet (the shard left behind
// created it just before the move, and had no time to record it): the
// shard the Stack joins must not take the Workspace, on which that Update
// is about to run, until the Update has finished. The default shard is
// stopped so that the Update stays pending for as long as the test needs.
// An Update of someone else's that carries the Stack's label and has not
// started (anyone may make one, and it need never finish) holds nothing.
func TestShardHandoverWaitsForUnseenUpdates(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	_, stopDefault := runShards(t)

	s, _ := newFileStack(t, "moving", func(string) string { return delayProgram })
	ns := s.Namespace
	s.Spec.Config = delay(0)
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	first := waitSucceeded(t, ns, "moving", "")
	stopDefault()

	// The operator's own Update: the Stack is its controller.
	owner := getStack(g, ns, "moving")
	pending := &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moving-unrecorded", Labels: map[string]string{stackrun.StackNameLabel: "moving"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, pulumiv1.GroupVersion.WithKind("Stack"))}},
		Spec: autov1alpha1.UpdateSpec{WorkspaceName: "moving", StackName: "dev", Type: autov1alpha1.UpType},
	}
	g.Expect(env.Client.Create(ctx, pending)).To(Succeed())
	decoy := &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moving-lookalike", Labels: map[string]string{stackrun.StackNameLabel: "moving"}},
		Spec:       autov1alpha1.UpdateSpec{WorkspaceName: "moving", StackName: "dev", Type: autov1alpha1.UpType},
	}
	g.Expect(env.Client.Create(ctx, decoy)).To(Succeed())
	label(g, ns, "moving", "blue")
	waitStack(t, ns, "moving", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		g.Expect(conditionMessage(s, "Reconciling")).To(ContainSubstring("update moving-unrecorded runs in shard default, which this Stack left"))
	})
	// A negative check, bounded by time on purpose: nothing marks "blue
	// looked and held back" but the message above, which blue writes at
	// its first look. The wrong outcome, taking the Workspace, would come
	// at one of its later looks, every handoverPoll; two of them is the
	// window.
	g.Consistently(func(g Gomega) {
		g.Expect(shardLabels(g, ns, "moving")).To(Equal(map[string]string{"Workspace": "", first: "", "moving-unrecorded": "", "moving-lookalike": ""}))
	}, 2*handoverPoll, pollInterval).Should(Succeed(), "shard blue took the Workspace while the default shard's Update was pending")

	// The Update ends (here: it is withdrawn); blue takes over, though the
	// look-alike is still pending.
	g.Expect(env.Client.Delete(ctx, pending)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(shardLabels(g, ns, "moving")).To(Equal(map[string]string{"Workspace": "blue", first: "", "moving-lookalike": ""}))
	}, opTimeout, pollInterval).Should(Succeed())
	waitSucceeded(t, ns, "moving", "")
}

// TestShardHandoverDropsOrphans: the shard a Stack leaves made its first
// Workspace and Update, then lost both records (its status patch
// conflicted with the move) and never came back to the Stack. The Update
// can never run (the choke point needs both records), so the shard the
// Stack joined deletes it instead of waiting for it for ever, deletes the
// unrecorded Workspace, and deploys the Stack itself. The default shard is
// stopped, and what it made is made by hand.
func TestShardHandoverDropsOrphans(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	_, stopDefault := runShards(t)
	stopDefault()

	s, _ := newFileStack(t, "orphan", func(string) string { return delayProgram })
	ns := s.Namespace
	s.Spec.Config = delay(0)
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	owner := getStack(g, ns, "orphan")
	ref := []metav1.OwnerReference{*metav1.NewControllerRef(owner, pulumiv1.GroupVersion.WithKind("Stack"))}
	g.Expect(env.Client.Create(ctx, &autov1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan", OwnerReferences: ref}})).To(Succeed())
	lost := &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan-lost", Labels: map[string]string{stackrun.StackNameLabel: "orphan"}, OwnerReferences: ref},
		Spec:       autov1alpha1.UpdateSpec{WorkspaceName: "orphan", StackName: "dev", Type: autov1alpha1.UpType},
	}
	g.Expect(env.Client.Create(ctx, lost)).To(Succeed())

	label(g, ns, "orphan", "blue")
	waitSucceeded(t, ns, "orphan", "")
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(lost), &autov1alpha1.Update{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the orphaned Update is still there: %v", err)
	g.Expect(shardLabels(g, ns, "orphan")).To(HaveKeyWithValue("Workspace", "blue"))
}

// TestShardHandoverTakesLateUpdates covers the other side of the moment
// of a move: the shard left behind, still reconciling the Stack as its
// cache had it, makes an Update after the shard the Stack joined took the
// Workspace. The old shard never starts it (an Update runs only on a
// Workspace of its own shard), so the new one moves it into its own
// shard, runs it, and records it. The default shard is stopped, and the
// late Update (as the Stack controller builds it) and what that shard
// would have written are made by hand.
func TestShardHandoverTakesLateUpdates(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	_, stopDefault := runShards(t)

	s, _ := newFileStack(t, "late", func(string) string { return delayProgram })
	ns := s.Namespace
	s.Spec.Config = delay(0)
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	first := waitSucceeded(t, ns, "late", "")
	stopDefault()

	// The update a reconcile request asks for, made by the default shard.
	patchStack(g, ns, "late", func(s *pulumiv1.Stack) { s.Annotations = map[string]string{shared.ReconcileRequestAnnotation: "now"} })
	owner := getStack(g, ns, "late")
	late := stackrun.BuildUpdate(owner, stackrun.UpdateFor{Revision: owner.Status.LastUpdate.LastSuccessfulCommit, Type: autov1alpha1.UpType, Trigger: ""})
	g.Expect(controllerutil.SetControllerReference(owner, late, env.Scheme)).To(Succeed())
	g.Expect(env.Client.Create(ctx, late)).To(Succeed())
	owner.Status.CurrentUpdate = &shared.CurrentStackUpdate{Generation: owner.Generation, ReconcileRequest: "now",
		Name: late.Name, UID: late.UID, Commit: owner.Status.LastUpdate.LastSuccessfulCommit}
	g.Expect(env.Client.Status().Update(ctx, owner)).To(Succeed())
	var ws autov1alpha1.Workspace
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "late"}, &ws)).To(Succeed())
	ws.Labels[shard.Label] = "blue"
	g.Expect(env.Client.Update(ctx, &ws)).To(Succeed())
	label(g, ns, "late", "blue")

	if got := waitSucceeded(t, ns, "late", first); got != late.Name {
		t.Fatalf("the Stack recorded update %s, want the late one, %s", got, late.Name)
	}
	g.Expect(shardLabels(g, ns, "late")).To(Equal(map[string]string{"Workspace": "blue", first: "", late.Name: "blue"}))
}

// TestShardPrerequisiteElsewhere checks that a Stack whose prerequisite is
// in another shard, which a named shard neither sees nor hears from, is
// Stalled with a message naming the field and both shards, and recovers
// when the prerequisite joins its shard.
func TestShardPrerequisiteElsewhere(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	runShards(t)

	pre, _ := newFileStack(t, "base", func(string) string { return delayProgram })
	ns := pre.Namespace
	pre.Spec.Config = delay(0)
	g.Expect(env.Client.Create(ctx, pre)).To(Succeed())
	app, _ := newFileStack(t, "app", func(string) string { return delayProgram })
	app.Namespace = ns
	app.Labels = map[string]string{shard.Label: "blue"}
	app.Spec.Config = delay(0)
	app.Spec.Prerequisites = []shared.PrerequisiteRef{{Name: "base"}}
	g.Expect(env.Client.Create(ctx, app)).To(Succeed())
	waitStack(t, ns, "app", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		g.Expect(conditionMessage(s, "Stalled")).To(HavePrefix("spec.prerequisites[0]: Stack base is in another shard (stackyard.dev/shard=default) and this object is in shard blue"))
	})
	label(g, ns, "base", "blue")
	waitSucceeded(t, ns, "app", "")
}

// TestShardUpdateElsewhere: an Update labelled for shard blue, on the
// Workspace of a Stack of the default shard, is not run by blue, whose
// caches hold neither that Workspace nor its Stack (so blue could not tell
// whether a stage governs it): it waits, saying that the two are in
// different shards, and the Stack's resources stay.
func TestShardUpdateElsewhere(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	runShards(t)

	s, target := newFileStack(t, "home", webProgram)
	ns := s.Namespace
	s.Spec.Config = config("home")
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	waitStack(t, ns, "home", opTimeout, ready)

	destroy := &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "home-destroy", Labels: map[string]string{shard.Label: "blue"}},
		Spec:       autov1alpha1.UpdateSpec{WorkspaceName: stackrun.WorkspaceName(s), StackName: "dev", Type: autov1alpha1.DestroyType},
	}
	g.Expect(env.Client.Create(ctx, destroy)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(destroy), destroy)).To(Succeed())
		c := apimeta.FindStatusCondition(destroy.Status.Conditions, autov1alpha1.UpdateConditionTypeProgressing)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(autov1alpha1.UpdateReasonPending))
		g.Expect(c.Message).To(HavePrefix("spec.workspaceName: workspace home is in another shard (stackyard.dev/shard=default) and this object is in shard blue"))
	}, opTimeout, pollInterval).Should(Succeed())
	g.Expect(destroy.Status.StartTime.IsZero()).To(BeTrue(), "the operation must never have started")
	g.Expect(readFile(g, target)).To(Equal("home"), "the resource must still be there")
}

// pollInterval paces the checks of this file.
const pollInterval = 250 * time.Millisecond

// handoverPoll is the controller's: how often a Stack that moved looks at
// Updates its former shard may run.
const handoverPoll = 5 * time.Second

func delay(seconds int) map[string]apiextensionsv1.JSON {
	return map[string]apiextensionsv1.JSON{"delay": {Raw: []byte(strconv.Itoa(seconds))}}
}

// conditionMessage is the message of the Stack's condition typ whose
// status is True, or "".
func conditionMessage(s *pulumiv1.Stack, typ string) string {
	if c := findCondition(s, typ); c != nil && c.Status == metav1.ConditionTrue {
		return c.Message
	}
	return ""
}

func setDelay(g Gomega, ns string, seconds int) {
	patchStack(g, ns, "moving", func(s *pulumiv1.Stack) { s.Spec.Config = delay(seconds) })
}

// label sets the Stack's shard label; "" removes it.
func label(g Gomega, ns, name, value string) {
	patchStack(g, ns, name, func(s *pulumiv1.Stack) {
		if value == "" {
			delete(s.Labels, shard.Label)
			return
		}
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[shard.Label] = value
	})
}

func patchStack(g Gomega, ns, name string, change func(*pulumiv1.Stack)) {
	g.Eventually(func() error {
		var s pulumiv1.Stack
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
			return err
		}
		change(&s)
		return env.Client.Update(context.Background(), &s)
	}, opTimeout, pollInterval).Should(Succeed())
}

// shardLabels maps the Stack's Workspace ("Workspace") and each of its
// Updates (by name) to their shard label, "" when unlabelled.
func shardLabels(g Gomega, ns, name string) map[string]string {
	ctx := context.Background()
	out := map[string]string{}
	var ws autov1alpha1.Workspace
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ws)).To(Succeed())
	out["Workspace"] = ws.Labels[shard.Label]
	var updates autov1alpha1.UpdateList
	g.Expect(env.Client.List(ctx, &updates, client.InNamespace(ns), client.MatchingLabels{stackrun.StackNameLabel: name})).To(Succeed())
	for _, u := range updates.Items {
		out[u.Name] = u.Labels[shard.Label]
	}
	return out
}

// waitSucceeded waits for the Stack to be Ready after a successful update
// other than previous, and returns that update's name.
func waitSucceeded(t *testing.T, ns, name, previous string) string {
	t.Helper()
	s := waitStack(t, ns, name, opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		ready(g, s)
		g.Expect(s.Status.LastUpdate).NotTo(BeNil())
		g.Expect(s.Status.LastUpdate.Name).NotTo(Equal(previous))
		g.Expect(s.Status.LastUpdate.State).To(Equal(shared.SucceededStackStateMessage))
	})
	return s.Status.LastUpdate.Name
}
