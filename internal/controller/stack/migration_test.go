package stack_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/controller/stack"
	"github.com/stackyard/stackyard/internal/stackrun"
	"github.com/stackyard/stackyard/test/argocd"
	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/testenv"
)

// Names the Pulumi Kubernetes Operator v2 (PKO) writes (its stack and
// workspace controllers, v2.x): the field manager of its objects, the label
// it puts on a Stack's Workspace and Updates beside pulumi.com/stack-name,
// and the annotation listing an outputs Secret's secret keys.
const (
	pkoFieldManager   = "pulumi-kubernetes-operator"
	pkoComponentLabel = "pulumi.com/component"
	pkoSecretOutputs  = "pulumi.com/secrets"
)

// TestAdoptStacksFromPulumiOperator switches Stacks from PKO to stackyard
// the way docs/migration.md says. PKO has deployed each one (the real
// pulumi CLI ran `up` on a checkout of the revision, as PKO's workspace pod
// does) and left behind what it leaves: the Stack with its finalizer and
// status (lastUpdate as PKO records it, observedGeneration, Ready), the
// Workspace it applied, its completed Update and that Update's outputs
// Secret, and for a Program its own status of it. Its controller is gone
// (the operator is stopped while all this is written); then stackyard
// starts over the same objects.
//
//   - "same" (a git branch, still at the commit PKO deployed) and "program"
//     (a Program, at the generation PKO deployed): stackyard takes the
//     Stack and its Workspace over without running anything: no Update of
//     its own, no operation in the backend's history, lastUpdate and
//     outputs as PKO left them.
//   - "moved": the branch moved on while the operators were switched.
//     stackyard runs exactly one update, of the new commit.
func TestAdoptStacksFromPulumiOperator(t *testing.T) {
	start := operatorStopped(t)
	same := deployedByPKO(t, "same", fromBranch)
	program := deployedByPKO(t, "program", fromProgram)
	moved := deployedByPKO(t, "moved", fromBranch)
	movedTo := moved.repo.Commit("main", map[string]string{"README": "pushed while the operators were switched"})
	start()

	for _, p := range []*pkoStack{same, program} {
		t.Run(p.name, func(t *testing.T) {
			g := NewWithT(t)
			s := waitAdopted(t, p)
			g.Expect(updateNames(g, p.ns)).To(ConsistOf(p.update), "stackyard started an update")
			g.Expect(backendHistory(t, p.dir)).To(Equal(1), "an operation ran in the backend")
			g.Expect(s.Status.LastUpdate).To(Equal(p.lastUpdate), "lastUpdate is PKO's, untouched")
			g.Expect(s.Status.Outputs).To(Equal(p.outputs))
			g.Expect(s.Status.History).To(BeEmpty())
			g.Expect(s.Status.CurrentUpdate).To(BeNil())
			g.Expect(s.Finalizers).To(Equal([]string{stack.Finalizer}))
			health, err := argocd.StackHealth(s)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(health.Status).To(Equal("Healthy"), health.Message)
		})
	}

	t.Run("moved", func(t *testing.T) {
		g := NewWithT(t)
		s := waitStack(t, moved.ns, moved.name, opTimeout, func(g Gomega, s *pulumiv1.Stack) {
			ready(g, s)
			g.Expect(s.Status.LastUpdate.LastSuccessfulCommit).To(Equal(movedTo))
		})
		names := updateNames(g, moved.ns)
		g.Expect(names).To(HaveLen(2), "PKO's Update and exactly one of stackyard's")
		g.Expect(names).To(ContainElement(moved.update))
		g.Expect(s.Status.History).To(HaveLen(1))
		run := s.Status.History[0]
		g.Expect(run.Trigger).To(Equal(string(stack.TriggerRevision)))
		g.Expect(run.Commit).To(Equal(movedTo))
		g.Expect(run.State).To(Equal(shared.SucceededStackStateMessage))
		g.Expect(names).To(ContainElement(run.Name))
		g.Expect(backendHistory(t, moved.dir)).To(Equal(2), "PKO's up and stackyard's one")
		g.Expect(s.Finalizers).To(Equal([]string{stack.Finalizer}))
	})
}

// pkoSource is where a Stack deployed by PKO takes its program from.
type pkoSource string

// The sources TestAdoptStacksFromPulumiOperator covers.
const (
	// fromBranch: a git repository's branch main.
	fromBranch pkoSource = "branch"
	// fromProgram: a Program object, which PKO serves as an artifact of
	// its own file server.
	fromProgram pkoSource = "program"
)

// pkoStack is a Stack that PKO deployed, as the test left it.
type pkoStack struct {
	ns, name string
	// repo holds the program of a fromBranch Stack.
	repo *gitserver.Repo
	// dir holds the file:// backend and target, the file the program
	// writes.
	dir, target string
	// update is the name of PKO's Update.
	update string
	// lastUpdate and outputs are the Stack's status as PKO wrote it.
	lastUpdate *shared.StackUpdateState
	outputs    shared.StackOutputs
}

// deployedByPKO deploys a program with the pulumi CLI to stack "dev" of a
// new file:// backend, from a checkout of the revision PKO would have
// deployed: the head of a new repository's branch, or the project PKO
// renders from a Program. It then writes the objects PKO leaves for it in a
// new namespace: the Stack named name (with PKO's finalizer and status),
// its Workspace, its completed Update and the Update's outputs Secret, and
// for a Program PKO's status of it. The operator must be stopped, or it
// would act on the Stack before PKO's status is written.
func deployedByPKO(t *testing.T, name string, src pkoSource) *pkoStack {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	p := &pkoStack{ns: newNamespace(t), name: name, dir: testenv.LiveDir(t)}
	p.target = filepath.Join(p.dir, "page.txt")
	backend := backendURL(t, p.dir)
	checkout := filepath.Join(t.TempDir(), "checkout")
	spec := shared.StackSpec{Stack: "dev", Backend: backend}
	wsSpec := autov1alpha1.WorkspaceSpec{
		PodTemplate: &autov1alpha1.EmbeddedPodTemplateSpec{Spec: &corev1.PodSpec{Containers: []corev1.Container{{Name: "pulumi"}}}},
		Env:         []corev1.EnvVar{{Name: "PULUMI_BACKEND_URL", Value: backend}},
		Stacks:      []autov1alpha1.WorkspaceStack{{Name: "dev", Create: ptr.To(true)}},
	}
	var revision string
	switch src {
	case fromBranch:
		p.repo = gitserver.New(t).CreateRepo(name)
		revision = p.repo.Commit("main", map[string]string{"Pulumi.yaml": webProgram(p.target)})
		runCommand(t, "", nil, "git", "clone", "--quiet", p.repo.URL, checkout)
		runCommand(t, checkout, nil, "git", "checkout", "--quiet", revision)
		spec.Config = config("hello")
		spec.GitSource = &shared.GitSource{ProjectRepo: p.repo.URL, Branch: "main"}
		wsSpec.Git = &autov1alpha1.GitSource{URL: p.repo.URL, Ref: revision}
		wsSpec.Stacks[0].Config = []autov1alpha1.ConfigItem{{Key: "web:message", Value: &apiextensionsv1.JSON{Raw: []byte(`"hello"`)}, Secret: ptr.To(false)}}
	case fromProgram:
		prog := programObject(p.ns, "site", p.target)
		g.Expect(env.Client.Create(ctx, prog)).To(Succeed())
		// PKO renders a Program as Pulumi.yaml named after it and serves
		// it from its own file server, at a URL of the generation.
		project := fmt.Sprintf("name: site\nruntime: yaml\nresources:\n  page:\n    type: stackyardtest:index:File\n"+
			"    properties:\n      path: %s\n      content: from a Program\noutputs:\n  sha: ${page.sha256}\n", p.target)
		g.Expect(os.MkdirAll(checkout, 0o755)).To(Succeed())
		g.Expect(os.WriteFile(filepath.Join(checkout, "Pulumi.yaml"), []byte(project), 0o644)).To(Succeed())
		revision = strconv.FormatInt(prog.Generation, 10)
		sum := sha256.Sum256([]byte(project))
		prog.Status = pulumiv1.ProgramStatus{
			ObservedGeneration: prog.Generation,
			Artifact: &pulumiv1.Artifact{
				Path:           fmt.Sprintf("programs/%s/site/%s.tar.gz", p.ns, revision),
				URL:            fmt.Sprintf("http://pulumi-kubernetes-operator.pulumi-kubernetes-operator:80/programs/%s/site/%s", p.ns, revision),
				Revision:       revision,
				Digest:         "sha256:" + hex.EncodeToString(sum[:]),
				LastUpdateTime: metav1.Now(),
			},
		}
		g.Expect(env.Client.Status().Update(ctx, prog)).To(Succeed())
		spec.ProgramRef = &shared.ProgramReference{Name: prog.Name}
		wsSpec.Flux = &autov1alpha1.FluxSource{URL: prog.Status.Artifact.URL, Digest: prog.Status.Artifact.Digest}
	}

	// PKO's workspace pod: the stack selected (created) and configured
	// from the Stack's spec, then `pulumi up`.
	cli := []string{"PULUMI_BACKEND_URL=" + backend}
	runCommand(t, checkout, cli, "pulumi", "stack", "init", "dev", "--non-interactive")
	if src == fromBranch {
		runCommand(t, checkout, cli, "pulumi", "config", "set", "message", "hello", "--non-interactive")
	}
	runCommand(t, checkout, cli, "pulumi", "up", "--yes", "--skip-preview", "--non-interactive")
	g.Expect(backendHistory(t, p.dir)).To(Equal(1))
	// The outputs, and which are secret: those the CLI masks unless asked
	// to show secrets.
	var masked, outputs map[string]any
	g.Expect(json.Unmarshal([]byte(runCommand(t, checkout, cli, "pulumi", "stack", "output", "--json", "--non-interactive")), &masked)).To(Succeed())
	g.Expect(json.Unmarshal([]byte(runCommand(t, checkout, cli, "pulumi", "stack", "output", "--json", "--show-secrets", "--non-interactive")), &outputs)).To(Succeed())
	var secretKeys []string
	for k, v := range outputs {
		if masked[k] == "[secret]" && v != "[secret]" {
			secretKeys = append(secretKeys, k)
			neverLogged(fmt.Sprint(v))
		}
	}

	// The Stack as applied by its owner; PKO added its finalizer.
	s := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns, Finalizers: []string{stack.Finalizer}},
		Spec:       spec,
	}
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	stackOwner := metav1.OwnerReference{APIVersion: pulumiv1.GroupVersion.String(), Kind: "Stack", Name: s.Name, UID: s.UID}
	labels := map[string]string{pkoComponentLabel: "stack", stackrun.StackNameLabel: name}

	// PKO's Workspace: server-side applied by its field manager, owned by
	// the Stack, pinned to the revision; its status as PKO's workspace
	// controller left it.
	ws := &autov1alpha1.Workspace{
		TypeMeta: metav1.TypeMeta{APIVersion: autov1alpha1.GroupVersion.String(), Kind: "Workspace"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: p.ns, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{controllerRef(stackOwner)},
		},
		Spec: wsSpec,
	}
	g.Expect(env.Client.Patch(ctx, ws, client.Apply, client.FieldOwner(pkoFieldManager))).To(Succeed())
	ws.Status = autov1alpha1.WorkspaceStatus{
		ObservedGeneration: ws.Generation,
		Address:            fmt.Sprintf("%s-workspace.%s:50051", name, p.ns),
		PulumiVersion:      "3.170.0",
		Conditions: []metav1.Condition{{
			Type: autov1alpha1.WorkspaceReady, Status: metav1.ConditionTrue, Reason: "Succeeded",
			ObservedGeneration: ws.Generation, LastTransitionTime: metav1.Now(),
		}},
	}
	g.Expect(env.Client.Status().Update(ctx, ws)).To(Succeed())

	// PKO's Update, named after the time in milliseconds, controlled by the
	// Workspace and owned by the Stack too, and its outputs Secret.
	started := metav1.NewTime(time.Now().Add(-10 * time.Minute).Truncate(time.Second))
	ended := metav1.NewTime(started.Add(20 * time.Second))
	p.update = fmt.Sprintf("%s-%x", name, started.UnixMilli())
	wsOwner := metav1.OwnerReference{APIVersion: autov1alpha1.GroupVersion.String(), Kind: "Workspace", Name: ws.Name, UID: ws.UID}
	stackOwner.BlockOwnerDeletion = ptr.To(true)
	upd := &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.update, Namespace: p.ns, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{controllerRef(wsOwner), stackOwner},
		},
		Spec: autov1alpha1.UpdateSpec{
			WorkspaceName:     ws.Name,
			StackName:         "dev",
			Type:              autov1alpha1.UpType,
			TtlAfterCompleted: &metav1.Duration{Duration: 24 * time.Hour},
			Message:           ptr.To("Initial stack update"),
			TargetDependents:  ptr.To(false),
			Refresh:           ptr.To(false),
		},
	}
	g.Expect(env.Client.Create(ctx, upd, client.FieldOwner(pkoFieldManager))).To(Succeed())
	data := map[string][]byte{}
	status := shared.StackOutputs{}
	for k, v := range outputs {
		raw, err := json.Marshal(v)
		g.Expect(err).NotTo(HaveOccurred())
		data[k] = raw
		status[k] = apiextensionsv1.JSON{Raw: raw}
	}
	for _, k := range secretKeys {
		status[k] = apiextensionsv1.JSON{Raw: []byte(`"[secret]"`)}
	}
	secretList, err := json.Marshal(append([]string{}, secretKeys...))
	g.Expect(err).NotTo(HaveOccurred())
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.update + "-stack-outputs", Namespace: p.ns,
			Annotations:     map[string]string{pkoSecretOutputs: string(secretList)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: autov1alpha1.GroupVersion.String(), Kind: "Update", Name: upd.Name, UID: upd.UID}},
		},
		Immutable: ptr.To(true),
		Data:      data,
	}
	g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
	upd.Status = autov1alpha1.UpdateStatus{
		ObservedGeneration: upd.Generation,
		StartTime:          started,
		EndTime:            ended,
		Outputs:            secret.Name,
		Conditions: []metav1.Condition{
			{Type: autov1alpha1.UpdateConditionTypeProgressing, Status: metav1.ConditionFalse, Reason: "Complete", ObservedGeneration: upd.Generation, LastTransitionTime: ended},
			{Type: autov1alpha1.UpdateConditionTypeComplete, Status: metav1.ConditionTrue, Reason: "Updated", ObservedGeneration: upd.Generation, LastTransitionTime: ended},
			{Type: autov1alpha1.UpdateConditionTypeFailed, Status: metav1.ConditionFalse, Reason: "succeeded", ObservedGeneration: upd.Generation, LastTransitionTime: ended},
		},
	}
	g.Expect(env.Client.Status().Update(ctx, upd)).To(Succeed())

	// The Stack's status as PKO's stack controller wrote it after the
	// update: lastUpdate, outputs (secret ones masked), projectInfo,
	// observedGeneration, and a Ready condition without an
	// observedGeneration of its own.
	s.Status = pulumiv1.StackStatus{
		ObservedGeneration: s.Generation,
		Conditions: []metav1.Condition{{
			Type: pulumiv1.ReadyCondition, Status: metav1.ConditionTrue,
			Reason: pulumiv1.ReadyCompletedReason, Message: pulumiv1.ReadyCompletedMessage,
			LastTransitionTime: ended,
		}},
		LastUpdate: &shared.StackUpdateState{
			Generation:           s.Generation,
			Name:                 upd.Name,
			Type:                 autov1alpha1.UpType,
			State:                shared.SucceededStackStateMessage,
			LastAttemptedCommit:  revision,
			LastSuccessfulCommit: revision,
			LastResyncTime:       ended,
		},
		Outputs:     status,
		ProjectInfo: &shared.ProjectInfo{Name: projectName(g, checkout), Runtime: "yaml"},
	}
	g.Expect(env.Client.Status().Update(ctx, s)).To(Succeed())
	p.lastUpdate, p.outputs = s.Status.LastUpdate, s.Status.Outputs
	return p
}

// projectName is the name in the Pulumi.yaml of dir.
func projectName(g Gomega, dir string) string {
	data, err := os.ReadFile(filepath.Join(dir, "Pulumi.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	first, _, _ := strings.Cut(string(data), "\n")
	name, ok := strings.CutPrefix(first, "name: ")
	g.Expect(ok).To(BeTrue(), "Pulumi.yaml does not start with its name: %q", first)
	return name
}

// controllerRef is ref marked as the controller, as controller-runtime's
// SetControllerReference makes it.
func controllerRef(ref metav1.OwnerReference) metav1.OwnerReference {
	ref.Controller, ref.BlockOwnerDeletion = ptr.To(true), ptr.To(true)
	return ref
}

// waitAdopted waits until stackyard has taken p's Stack over: its Ready
// condition says the generation it was computed for (PKO's says none), and
// the Workspace is stackyard's (applied by its field manager) and set up by
// stackyard's agent for its current generation. The Workspace is applied in
// the reconcile that decides whether an update is due, just before it
// would start one, so an Update started by that decision exists by then.
func waitAdopted(t *testing.T, p *pkoStack) *pulumiv1.Stack {
	t.Helper()
	return waitStack(t, p.ns, p.name, opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		ready(g, s)
		c := apimeta.FindStatusCondition(s.Status.Conditions, pulumiv1.ReadyCondition)
		g.Expect(c.ObservedGeneration).To(Equal(s.Generation), "the Ready condition is still PKO's")
		ws := getWorkspace(g, p.ns, p.name)
		g.Expect(managers(ws)).To(ContainElement(stack.FieldManager), "stackyard has not applied the Workspace")
		g.Expect(ws.Status.Setup).NotTo(BeNil(), "stackyard's agent has not set the Workspace up")
		g.Expect(ws.Status.ObservedGeneration).To(Equal(ws.Generation))
		g.Expect(ws.Status.IsReady()).To(BeTrue())
	})
}

// managers lists the field managers of obj.
func managers(obj metav1.Object) []string {
	var out []string
	for _, m := range obj.GetManagedFields() {
		out = append(out, m.Manager)
	}
	return out
}

// updateNames lists the names of the Updates in ns.
func updateNames(g Gomega, ns string) []string {
	var list autov1alpha1.UpdateList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var names []string
	for _, u := range list.Items {
		names = append(names, u.Name)
	}
	return names
}

// backendHistory counts the operations recorded in the file:// backend
// under dir: the CLI writes one .history.json file per up, refresh or
// destroy (previews write none).
func backendHistory(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	root := filepath.Join(dir, "state", ".pulumi", "history")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".history.json") {
			n++
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return n
}

// runCommand runs a command in dir (the test's directory when empty) with
// extra environment and returns its standard output, failing the test with
// its standard error if it fails.
func runCommand(t *testing.T, dir string, extraEnv []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), extraEnv...)
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}

// operatorStopped stops the shared operator, as the migration scales PKO's
// controller to zero before stackyard is installed, and returns the
// function that starts it again. Whatever happens in the test, an operator
// runs again when it ends, for the tests after it.
func operatorStopped(t *testing.T) (start func()) {
	t.Helper()
	stopOperator()
	running := false
	t.Cleanup(func() {
		if !running {
			if err := startOperator(); err != nil {
				t.Errorf("starting the operator again: %v", err)
			}
		}
	})
	return func() {
		t.Helper()
		if err := startOperator(); err != nil {
			t.Fatalf("starting the operator: %v", err)
		}
		running = true
	}
}
