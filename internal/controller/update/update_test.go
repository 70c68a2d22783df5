package update

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// opTimeout bounds one short operation of the test program.
const opTimeout = 60 * time.Second

// TestLifecycle runs preview, up, refresh and destroy on one stack through
// Updates: a preview created before its workspace waits (Pending) for it to
// exist and then for its idle agent to run, then records a change summary; up records the outputs in an immutable Secret
// owned by the Update, with the secret output flagged and its value found
// nowhere else (status, events, operator logs at debug level); refresh
// records outputs again; destroy records none.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startManager(Options{MaxConcurrentReconciles: 1})

	// A preview whose workspace does not exist yet waits for it, then for
	// its idle agent to be started.
	f.createUpdate("preview", "ws", autov1alpha1.PreviewType)
	pendingWith := func(msg string) func(*autov1alpha1.Update) bool {
		return func(u *autov1alpha1.Update) bool {
			return u != nil && progressingReason(u) == autov1alpha1.UpdateReasonPending && u.Status.Conditions[0].Message == msg
		}
	}
	f.waitFor("preview", 20*time.Second, "waiting for the workspace", pendingWith("waiting for workspace ws to exist"))
	f.newWorkspace("ws", nil, false)
	f.waitFor("preview", 20*time.Second, "waiting for the agent", pendingWith("waiting for the agent of workspace ws to start"))
	f.setServing("ws", true)

	u := f.waitComplete("preview", opTimeout)
	if u.Status.IsFailed() {
		t.Fatalf("preview failed: %s", u.Status.Message)
	}
	if u.Status.Outputs != "" {
		t.Fatalf("status.outputs = %q: a preview has no outputs", u.Status.Outputs)
	}
	if u.Status.Changes["create"] < 3 {
		t.Errorf("status.changes %v: want at least 3 creates", u.Status.Changes)
	}
	if !slices.ContainsFunc(u.Status.ResourceChanges, func(c autov1alpha1.ResourceChange) bool {
		return c.URN == randomURN && c.Type == "stackyardtest:index:Random" && c.Op == "create"
	}) {
		t.Errorf("status.resourceChanges %v lack the creation of %s", u.Status.ResourceChanges, randomURN)
	}

	// up: outputs in an immutable Secret, the secret one flagged.
	f.createUpdate("up", "ws", autov1alpha1.UpType, func(u *autov1alpha1.Update) {
		u.Spec.Message = ptrTo("deploy from the test")
	})
	u = f.waitComplete("up", opTimeout)
	if u.Status.IsFailed() || failedReason(u) != autov1alpha1.UpdateReasonSucceeded {
		t.Fatalf("up: failed=%v reason=%s message=%s", u.Status.IsFailed(), failedReason(u), u.Status.Message)
	}
	if u.Status.StartTime.IsZero() || u.Status.EndTime.IsZero() || u.Status.EndTime.Before(&u.Status.StartTime) {
		t.Errorf("times: start %v end %v", u.Status.StartTime, u.Status.EndTime)
	}
	if u.Status.ProjectInfo == nil || u.Status.ProjectInfo.Name != "yard" || u.Status.ProjectInfo.Runtime != "yaml" {
		t.Errorf("projectInfo = %+v, want yard/yaml", u.Status.ProjectInfo)
	}
	if u.Status.ObservedGeneration != u.Generation {
		t.Errorf("observedGeneration %d, generation %d", u.Status.ObservedGeneration, u.Generation)
	}
	u = f.waitFor("up", 10*time.Second, "without finalizer", func(u *autov1alpha1.Update) bool {
		return u != nil && len(u.Finalizers) == 0
	})

	s := f.secret(u.Status.Outputs)
	if s.Immutable == nil || !*s.Immutable {
		t.Error("the outputs Secret is not immutable")
	}
	if !metav1.IsControlledBy(s, u) {
		t.Errorf("the outputs Secret is not controlled by the Update: %+v", s.OwnerReferences)
	}
	if got := s.Annotations[autov1alpha1.SecretOutputsAnnotation]; got != `["token"]` {
		t.Errorf("annotation %s = %s, want [\"token\"]", autov1alpha1.SecretOutputsAnnotation, got)
	}
	if got := string(s.Data["answer_key"]); got != "42" {
		t.Errorf("output answer/key = %q, want 42", got)
	}
	var plain, token string
	if err := json.Unmarshal(s.Data["plain"], &plain); err != nil || len(plain) != 24 {
		t.Errorf("output plain = %q (%v), want a JSON string of 24 characters", s.Data["plain"], err)
	}
	if err := json.Unmarshal(s.Data["token"], &token); err != nil || len(token) != 24 {
		t.Fatalf("output token = %q (%v), want a JSON string of 24 characters", s.Data["token"], err)
	}

	if !f.metrics.observed("up", ResultSucceeded, 1) || !f.metrics.observed("preview", ResultSucceeded, 1) {
		t.Errorf("metrics: %+v", f.metrics.obs)
	}

	// refresh records the outputs again; destroy has none. The refresh is
	// a Stack's, which reports its progress itself.
	f.createUpdate("refresh", "ws", autov1alpha1.RefreshType, func(u *autov1alpha1.Update) {
		u.OwnerReferences = []metav1.OwnerReference{{APIVersion: "pulumi.com/v1", Kind: "Stack", Name: "owner",
			UID: "4f0c4f6e-0000-4000-8000-000000000001", Controller: ptrTo(true)}}
	})
	u = f.waitComplete("refresh", opTimeout)
	if u.Status.IsFailed() {
		t.Fatalf("refresh failed: %s", u.Status.Message)
	}
	if got := f.secret(u.Status.Outputs).Data["token"]; string(got) != string(s.Data["token"]) {
		t.Errorf("refresh recorded token %q, want the up's", got)
	}
	f.createUpdate("destroy", "ws", autov1alpha1.DestroyType)
	u = f.waitComplete("destroy", opTimeout)
	if u.Status.IsFailed() {
		t.Fatalf("destroy failed: %s", u.Status.Message)
	}
	if u.Status.Outputs != "" {
		t.Errorf("destroy recorded outputs %q", u.Status.Outputs)
	}
	if !strings.Contains(u.Status.Message, "delete=") {
		t.Errorf("destroy message %q does not count deletions", u.Status.Message)
	}

	// The secret output's value, which up and refresh fetched in clear
	// text, is nowhere but in the outputs Secrets.
	texts := map[string]string{"operator logs": f.logs.String()}
	for name, events := range map[string]int{"preview": 2, "up": 2, "destroy": 2, "refresh": 0} {
		b, _ := json.Marshal(f.get(name))
		texts["Update "+name] = string(b)
		texts["events of "+name] = strings.Join(f.events(name, events), "\n")
	}
	assertNoSecret(t, token, texts)

	// Normal events: Started and Succeeded on the standalone Updates, none
	// on the Stack's. The destroy's, recorded after the refresh's would
	// have been through the same recorder, are there.
	if got := f.events("destroy", 2); len(got) != 2 {
		t.Errorf("events of the destroy: %q, want Started and Succeeded", got)
	}
	if got := f.events("refresh", 0); len(got) != 0 {
		t.Errorf("events of the Stack's refresh: %q, want none (the Stack records them)", got)
	}
}

// TestFailedOperation runs an up whose Fail resource fails: the Update
// completes with Failed=True, reason UpdateFailed, the agent's reason and
// the resource's error in the message, and a Warning event saying so.
func TestFailedOperation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startManager(Options{DashboardURL: "https://stackyard.example/"})
	f.workspace("ws", map[string]any{"fail": true})
	f.createUpdate("up", "ws", autov1alpha1.UpType)

	u := f.waitComplete("up", opTimeout)
	// A file backend gives no permalink: the dashboard's page is it.
	if want := "https://stackyard.example/updates/" + f.ns + "/up"; u.Status.Permalink != want {
		t.Errorf("permalink %q, want %q", u.Status.Permalink, want)
	}
	if !u.Status.IsFailed() || failedReason(u) != autov1alpha1.UpdateReasonFailed {
		t.Fatalf("failed=%v reason=%s, want Failed=True reason %s", u.Status.IsFailed(), failedReason(u), autov1alpha1.UpdateReasonFailed)
	}
	if !strings.Contains(u.Status.Message, "failed on purpose") || !strings.HasPrefix(u.Status.Message, "ResourceFailed: ") {
		t.Errorf("message %q: want the agent's reason and the resource's error", u.Status.Message)
	}
	if u.Status.Outputs != "" {
		t.Errorf("a failed up recorded outputs %q", u.Status.Outputs)
	}
	if tail := strings.Join(u.Status.LogTail, "\n"); !strings.Contains(tail, "failed on purpose") {
		t.Errorf("log tail %q: want the failure's diagnostic", tail)
	}
	events := f.events("up", 2)
	if !containsLine(events, "Warning "+autov1alpha1.UpdateReasonFailed+": up of stack dev failed: ResourceFailed: ") {
		t.Errorf("events %q: want a Warning %s naming the failure", events, autov1alpha1.UpdateReasonFailed)
	}
	f.waitFor("up", 10*time.Second, "without finalizer", func(u *autov1alpha1.Update) bool { return u != nil && len(u.Finalizers) == 0 })
	if !f.metrics.observed("up", ResultFailed, 1) {
		t.Errorf("metrics: %+v", f.metrics.obs)
	}
}

// TestInvalidSpec fails an Update that names no stack without asking any
// agent.
func TestInvalidSpec(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startManager(Options{})
	f.createUpdate("nostack", "ws", autov1alpha1.UpType, func(u *autov1alpha1.Update) { u.Spec.StackName = "" })
	u := f.waitComplete("nostack", 20*time.Second)
	if failedReason(u) != autov1alpha1.UpdateReasonFailed || u.Status.Message != "spec.stackName is required" {
		t.Errorf("reason %s message %q", failedReason(u), u.Status.Message)
	}
}

// TestTTLAfterCompleted deletes a finished Update once its TTL has passed
// since its end; its outputs Secret, owned by it, is left to the garbage
// collector (which envtest does not run). An up is used because only
// operations with outputs have the Secret.
func TestTTLAfterCompleted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startManager(Options{})
	f.workspace("ws", nil)
	ttl := 2 * time.Second
	f.createUpdate("ttl-up", "ws", autov1alpha1.UpType, func(u *autov1alpha1.Update) {
		u.Spec.TtlAfterCompleted = &metav1.Duration{Duration: ttl}
	})
	u := f.waitComplete("ttl-up", opTimeout)
	if !metav1.IsControlledBy(f.secret(u.Status.Outputs), u) {
		t.Error("the outputs Secret is not owned by the Update")
	}
	f.waitFor("ttl-up", 15*time.Second, "deleted", func(u *autov1alpha1.Update) bool { return u == nil })
	// endTime has a resolution of one second.
	if gone := time.Now(); gone.Before(u.Status.EndTime.Add(ttl - time.Second)) {
		t.Errorf("deleted at %v, before its end %v plus the TTL", gone, u.Status.EndTime)
	}
	if !containsLine(f.events("ttl-up", 3), "Normal "+EventExpired+": ") {
		t.Errorf("no %s event", EventExpired)
	}
}

// TestOneOperationPerWorkspace creates two Updates of one workspace at
// once: the second waits for the first instead of failing on the busy
// agent.
func TestOneOperationPerWorkspace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startManager(Options{MaxConcurrentReconciles: 2})
	f.workspace("ws", nil)
	f.createUpdate("first", "ws", autov1alpha1.PreviewType)
	f.createUpdate("second", "ws", autov1alpha1.PreviewType)
	for _, name := range []string{"first", "second"} {
		if u := f.waitComplete(name, opTimeout); u.Status.IsFailed() {
			t.Errorf("%s: %s: %s", name, failedReason(u), u.Status.Message)
		}
	}
}

// TestStackUpdateWaitsUnwritten: an Update a Stack owns writes no status
// while its Workspace's agent has not started (its Stack reports that
// wait, and a missing condition reads as pending), where a standalone one
// says it is pending. The single worker orders the two: the owned
// Update's reconcile is seen stopping at the wait in the operator's log,
// then the standalone one is created, and once that one shows Pending the
// owned one's reconcile has ended, patch included. Once the agent serves,
// both run.
func TestStackUpdateWaitsUnwritten(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startManager(Options{MaxConcurrentReconciles: 1})
	f.newWorkspace("ws", nil, false)
	const waiting = "waiting for the agent of workspace ws to start"
	f.createUpdate("owned", "ws", autov1alpha1.PreviewType, func(u *autov1alpha1.Update) {
		u.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: pulumiv1.GroupVersion.String(), Kind: "Stack", Name: "app",
			UID: types.UID("5f0c3a52-7d1e-4c55-9a39-0d2b8e6f4b11"), Controller: ptr.To(true),
		}}
	})
	deadline := time.Now().Add(20 * time.Second)
	for !slices.ContainsFunc(strings.Split(f.logs.String(), "\n"), func(l string) bool {
		return strings.Contains(l, `"reconcile stopped"`) && strings.Contains(l, `"owned"`) && strings.Contains(l, waiting)
	}) {
		if time.Now().After(deadline) {
			t.Fatalf("no reconcile of the owned Update stopped at %q within 20s", waiting)
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.createUpdate("standalone", "ws", autov1alpha1.PreviewType)
	f.waitFor("standalone", 20*time.Second, "pending", func(u *autov1alpha1.Update) bool {
		return u != nil && progressingReason(u) == autov1alpha1.UpdateReasonPending && u.Status.Conditions[0].Message == waiting
	})
	if u := f.get("owned"); len(u.Status.Conditions) != 0 || u.Status.ObservedGeneration != 0 {
		t.Errorf("the Stack's Update wrote its status while waiting: %s", statusJSON(u))
	}
	f.setServing("ws", true)
	for _, name := range []string{"owned", "standalone"} {
		if u := f.waitComplete(name, opTimeout); u.Status.IsFailed() {
			t.Errorf("%s: %s: %s", name, failedReason(u), u.Status.Message)
		}
	}
}

// containsLine reports whether a line of lines starts with prefix.
func containsLine(lines []string, prefix string) bool {
	return slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
}

// ptrTo returns a pointer to v.
func ptrTo[T any](v T) *T { return &v }
