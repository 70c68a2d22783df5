package stack_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/test/argocd"
	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/testenv"
)

const opTimeout = 90 * time.Second

// program is a Pulumi YAML project that writes config value `message` to a
// file (so a test can see what was deployed), makes a random value with a
// secret twin, and optionally fails.
func program(target string, fail bool) string {
	return fmt.Sprintf(`name: web
runtime: yaml
config:
  message:
    type: string
resources:
  page:
    type: stackyardtest:index:File
    properties:
      path: %s
      content: ${message}
  token:
    type: stackyardtest:index:Random
    properties:
      length: 8
  gate:
    type: stackyardtest:index:Fail
    properties:
      message: the gate is closed
      fail: %v
outputs:
  sha: ${page.sha256}
  secretToken: ${token.secretResult}
`, target, fail)
}

func config(message string) map[string]apiextensionsv1.JSON {
	return map[string]apiextensionsv1.JSON{"web:message": {Raw: []byte(fmt.Sprintf("%q", message))}}
}

func ready(g Gomega, s *pulumiv1.Stack) {
	g.Expect(sreconcile.IsReady(s.Status.Conditions)).To(BeTrue(), "not Ready")
	g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
}

func readFile(g Gomega, path string) string {
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	return string(data)
}

// TestGitBranchStack deploys a program tracked on a git branch, then a new
// commit requested by annotation, and checks the status contract Argo CD
// reads.
func TestGitBranchStack(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	dir := testenv.LiveDir(t)
	target := filepath.Join(dir, "page.txt")

	git := gitserver.New(t)
	repo := git.CreateRepo("web")
	first := repo.Commit("main", map[string]string{"infra/Pulumi.yaml": program(target, false)})

	stack := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: shared.StackSpec{
			Stack:     "dev",
			Backend:   backendURL(t, dir),
			Config:    config("hello"),
			GitSource: &shared.GitSource{ProjectRepo: repo.URL, Branch: "main", RepoDir: "infra"},
		},
	}
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())

	s := waitStack(t, ns, "web", opTimeout, ready)
	g.Expect(readFile(g, target)).To(Equal("hello"))
	g.Expect(s.Finalizers).To(ContainElement("finalizer.stack.pulumi.com"))
	lu := s.Status.LastUpdate
	g.Expect(lu).NotTo(BeNil())
	g.Expect(lu.State).To(Equal(shared.SucceededStackStateMessage))
	g.Expect(lu.Type).To(Equal(autov1alpha1.UpType))
	g.Expect(lu.LastAttemptedCommit).To(Equal(first))
	g.Expect(lu.LastSuccessfulCommit).To(Equal(first))
	g.Expect(lu.Generation).To(Equal(s.Generation))
	g.Expect(s.Status.CurrentUpdate).To(BeNil())
	g.Expect(s.Status.Outputs).To(HaveKey("sha"))
	g.Expect(string(s.Status.Outputs["secretToken"].Raw)).To(Equal(`"[secret]"`))
	g.Expect(s.Status.History).To(HaveLen(1))
	g.Expect(s.Status.History[0].Trigger).To(Equal("NoLastUpdate"))
	g.Expect(s.Status.History[0].Changes).To(HaveKeyWithValue("create", BeNumerically(">=", 3)))
	g.Expect(s.Status.ProjectInfo).To(Equal(&shared.ProjectInfo{Name: "web", Runtime: "yaml"}))
	health, err := argocd.StackHealth(s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(health.Status).To(Equal("Healthy"), health.Message)

	// A spec change is deployed; Argo CD sees Progressing until it is.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
	s.Spec.Config = config("bonjour")
	g.Expect(env.Client.Update(ctx, s)).To(Succeed())
	health, err = argocd.StackHealth(s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(health.Status).To(Equal("Progressing"))
	s = waitStack(t, ns, "web", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		ready(g, s)
		g.Expect(s.Status.LastUpdate.Generation).To(Equal(s.Generation))
	})
	g.Expect(readFile(g, target)).To(Equal("bonjour"))
	g.Expect(s.Status.History[0].Trigger).To(Equal("GenerationChanged"))

	// A new commit on the branch, picked up at once on a reconcile request.
	second := repo.Commit("main", map[string]string{"infra/Pulumi.yaml": program(target, false), "infra/README": "v2"})
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
	s.Annotations = map[string]string{shared.ReconcileRequestAnnotation: "r1"}
	g.Expect(env.Client.Update(ctx, s)).To(Succeed())
	s = waitStack(t, ns, "web", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		ready(g, s)
		g.Expect(s.Status.ObservedReconcileRequest).To(Equal("r1"))
		g.Expect(s.Status.LastUpdate.LastSuccessfulCommit).To(Equal(second))
	})
	health, err = argocd.StackHealth(s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(health.Status).To(Equal("Healthy"), health.Message)
	g.Expect(s.Status.History).To(HaveLen(3))

	// Pinned to the first commit: that commit is deployed, and a new
	// commit on the branch is not, even on a reconcile request.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
	s.Spec.GitSource.Branch, s.Spec.GitSource.Commit = "", first
	s.Spec.Config = config("pinned")
	g.Expect(env.Client.Update(ctx, s)).To(Succeed())
	waitStack(t, ns, "web", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		ready(g, s)
		g.Expect(s.Status.LastUpdate.LastSuccessfulCommit).To(Equal(first))
	})
	g.Expect(readFile(g, target)).To(Equal("pinned"))
	repo.Commit("main", map[string]string{"infra/Pulumi.yaml": program(target, true)})
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
	s.Annotations[shared.ReconcileRequestAnnotation] = "r2"
	g.Expect(env.Client.Update(ctx, s)).To(Succeed())
	s = waitStack(t, ns, "web", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		ready(g, s)
		g.Expect(s.Status.LastUpdate.ReconcileRequest).To(Equal("r2"))
	})
	g.Expect(s.Status.LastUpdate.LastSuccessfulCommit).To(Equal(first))
}

// TestFailuresRetryThenStall runs a program that fails: it is retried with
// backoff (capped at one second here), stalls after three failures in a row
// with reason UpdateFailed (Argo CD: Degraded), and recovers when the spec
// is fixed.
func TestFailuresRetryThenStall(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	dir := testenv.LiveDir(t)
	target := filepath.Join(dir, "page.txt")
	git := gitserver.New(t)
	repo := git.CreateRepo("web")
	repo.Commit("main", map[string]string{"Pulumi.yaml": program(target, true)})

	stack := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "failing", Namespace: ns},
		Spec: shared.StackSpec{
			Stack:                          "dev",
			Backend:                        backendURL(t, dir),
			Config:                         config("hello"),
			GitSource:                      &shared.GitSource{ProjectRepo: repo.URL, Branch: "main"},
			RetryMaxBackoffDurationSeconds: 1,
		},
	}
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	s := waitStack(t, ns, "failing", 3*opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		g.Expect(sreconcile.IsStalled(s.Status.Conditions)).To(BeTrue())
	})
	stalled := findCondition(s, "Stalled")
	g.Expect(stalled.Reason).To(Equal(pulumiv1.UpdateFailedReason))
	g.Expect(stalled.Message).To(ContainSubstring("the gate is closed"))
	g.Expect(s.Status.LastUpdate.Failures).To(BeEquivalentTo(3))
	g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation), "a stall is a handled generation")
	health, err := argocd.StackHealth(s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(health.Status).To(Equal("Degraded"))
	g.Expect(strings.Contains(describe(s), "secret")).To(BeFalse())

	// Fixing the program and asking again lifts the stall.
	repo.Commit("main", map[string]string{"Pulumi.yaml": program(target, false)})
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
	s.Annotations = map[string]string{shared.ReconcileRequestAnnotation: "fixed"}
	g.Expect(env.Client.Update(ctx, s)).To(Succeed())
	waitStack(t, ns, "failing", opTimeout, ready)
	g.Expect(readFile(g, target)).To(Equal("hello"))
}

// TestDestroyOnFinalize deletes a Stack whose resources are destroyed
// first: the finalizer holds the Stack until the destroy succeeded.
func TestDestroyOnFinalize(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	stack, target := programStack(t, "site", func(s *shared.StackSpec) { s.DestroyOnFinalize = true })
	ns := stack.Namespace
	waitStack(t, ns, "site", opTimeout, ready)
	g.Expect(readFile(g, target)).To(Equal("from a Program"))

	g.Expect(env.Client.Delete(ctx, stack)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getStack(g, ns, "site")).To(BeNil())
	}, opTimeout, 250*time.Millisecond).Should(Succeed())
	_, err := os.Stat(target)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "destroy must have removed the file")
	var ws autov1alpha1.Workspace
	g.Expect(client.IgnoreNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "site"}, &ws))).To(Succeed())
}

// TestPreviewStack only previews: Ready on success, nothing deployed, the
// change summary in the history, and no destroy on delete.
func TestPreviewStack(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	stack, target := programStack(t, "preview", func(s *shared.StackSpec) {
		s.Stack, s.Preview, s.DestroyOnFinalize = "preview", true, true
	})
	ns := stack.Namespace
	s := waitStack(t, ns, "preview", opTimeout, ready)
	_, err := os.Stat(target)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "a preview deploys nothing")
	g.Expect(s.Status.LastUpdate.Type).To(Equal(autov1alpha1.PreviewType))
	g.Expect(s.Status.History[0].Changes).To(HaveKeyWithValue("create", BeNumerically(">=", 1)))
	g.Expect(env.Client.Delete(ctx, s)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getStack(g, ns, "preview")).To(BeNil())
	}, opTimeout, 250*time.Millisecond).Should(Succeed())
	var updates autov1alpha1.UpdateList
	g.Expect(env.Client.List(ctx, &updates, client.InNamespace(ns))).To(Succeed())
	for _, u := range updates.Items {
		g.Expect(u.Spec.Type).NotTo(Equal(autov1alpha1.DestroyType), "a preview stack never destroys")
	}
}

// TestSecretsNeverReachStatus deploys a stack whose config comes from a
// Secret and checks the value is in no status, event or object the operator
// wrote.
func TestSecretsNeverReachStatus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	stack, target := newFileStack(t, "secretive", webProgram)
	ns := stack.Namespace
	const value = "very-secret-message-4711"
	neverLogged(value)
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "msg", Namespace: ns},
		StringData: map[string]string{"text": value},
	})).To(Succeed())
	stack.Spec.SecretRefs = map[string]shared.ResourceRef{"web:message": shared.NewSecretResourceRef("msg", "text")}
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	s := waitStack(t, ns, "secretive", opTimeout, ready)
	g.Expect(readFile(g, target)).To(Equal(value), "the program received the secret")

	for _, list := range []client.ObjectList{&pulumiv1.StackList{}, &autov1alpha1.WorkspaceList{}, &autov1alpha1.UpdateList{}, &corev1.EventList{}} {
		g.Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		g.Expect(fmt.Sprintf("%+v", list)).NotTo(ContainSubstring(value))
	}
	g.Expect(fmt.Sprintf("%+v", s.Status)).NotTo(ContainSubstring(value))
}

// backendURL makes a file:// state backend under dir (the backend needs
// its directory to exist).
func backendURL(t *testing.T, dir string) string {
	t.Helper()
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	return "file://" + state
}

func findCondition(s *pulumiv1.Stack, typ string) *metav1.Condition {
	for i := range s.Status.Conditions {
		if s.Status.Conditions[i].Type == typ {
			return &s.Status.Conditions[i]
		}
	}
	return nil
}

// programStack creates, in a new namespace, the Program "site" (which
// writes a file) and a Stack named name deploying it with its own file://
// backend, its spec adjusted by mutate. It returns the Stack as created and
// the file the program writes.
func programStack(t *testing.T, name string, mutate func(*shared.StackSpec)) (*pulumiv1.Stack, string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	dir := testenv.LiveDir(t)
	target := filepath.Join(dir, "page.txt")
	g.Expect(env.Client.Create(ctx, programObject(ns, "site", target))).To(Succeed())
	s := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: shared.StackSpec{
			Stack:      "dev",
			Backend:    backendURL(t, dir),
			ProgramRef: &shared.ProgramReference{Name: "site"},
		},
	}
	if mutate != nil {
		mutate(&s.Spec)
	}
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	return s, target
}

// newFileStack returns, not yet created, a Stack named name in a new
// namespace that deploys a Pulumi YAML project from a new git repository,
// on branch main, to stack "dev" of its own file:// backend. The project is
// made by project from the path of the file it is to write, in the
// backend's directory; newFileStack returns that path too. Tests adjust the
// spec, then create the Stack.
func newFileStack(t *testing.T, name string, project func(target string) string) (*pulumiv1.Stack, string) {
	t.Helper()
	dir := testenv.LiveDir(t)
	target := filepath.Join(dir, "page.txt")
	return &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: newNamespace(t)},
		Spec: shared.StackSpec{
			Stack:     "dev",
			Backend:   backendURL(t, dir),
			GitSource: programSource(t, name, project(target)),
		},
	}, target
}

// webProgram is program without failing, the project of most Stacks made
// with newFileStack.
func webProgram(target string) string { return program(target, false) }

// programObject is a Program that writes a file.
func programObject(ns, name, target string) *pulumiv1.Program {
	return &pulumiv1.Program{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Program: pulumiv1.ProgramSpec{
			Resources: map[string]pulumiv1.Resource{
				"page": {
					Type: "stackyardtest:index:File",
					Properties: map[string]apiextensionsv1.JSON{
						"path":    {Raw: []byte(fmt.Sprintf("%q", target))},
						"content": {Raw: []byte(`"from a Program"`)},
					},
				},
			},
			Outputs: map[string]apiextensionsv1.JSON{"sha": {Raw: []byte(`"${page.sha256}"`)}},
		},
	}
}

// TestExpectNoRefreshChanges honours expectNoRefreshChanges (the upstream
// operator ignores it): after the deployed file is edited by hand, the
// refresh before the next update finds the change and the update fails
// without touching anything, so the hand edit is still there.
func TestExpectNoRefreshChanges(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	stack, target := newFileStack(t, "strict", webProgram)
	ns := stack.Namespace
	stack.Spec.Config = config("hello")
	stack.Spec.Refresh, stack.Spec.ExpectNoRefreshChanges = true, true
	stack.Spec.RetryMaxBackoffDurationSeconds = 1
	g.Expect(env.Client.Create(ctx, stack)).To(Succeed())
	s := waitStack(t, ns, "strict", opTimeout, ready)

	g.Expect(os.WriteFile(target, []byte("edited by hand"), 0o644)).To(Succeed())
	s.Annotations = map[string]string{shared.ReconcileRequestAnnotation: "after-edit"}
	g.Expect(env.Client.Update(ctx, s)).To(Succeed())
	s = waitStack(t, ns, "strict", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		g.Expect(s.Status.LastUpdate.ReconcileRequest).To(Equal("after-edit"))
		g.Expect(s.Status.LastUpdate.State).To(Equal(shared.FailedStackStateMessage))
	})
	g.Expect(s.Status.LastUpdate.Message).To(ContainSubstring("changes made outside Pulumi"))
	g.Expect(readFile(g, target)).To(Equal("edited by hand"), "nothing may be updated after a refresh found changes")
}
