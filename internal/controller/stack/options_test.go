package stack_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/test/argocd"
	"github.com/stackyard/stackyard/test/testenv"
)

// getWorkspace reads the Workspace of the Stack name.
func getWorkspace(g Gomega, ns, name string) *autov1alpha1.Workspace {
	var ws autov1alpha1.Workspace
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &ws)).To(Succeed())
	return &ws
}

// backendStacks lists the names of the stacks a file:// backend under dir
// holds (its .pulumi/stacks/<project>/<stack>.json files).
func backendStacks(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	root := filepath.Join(dir, "state")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if !d.IsDir() && strings.HasPrefix(rel, filepath.Join(".pulumi", "stacks")) && strings.HasSuffix(path, ".json") {
			names = append(names, strings.TrimSuffix(filepath.Base(path), ".json"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestUseLocalStackOnly points a Stack with useLocalStackOnly at a Pulumi
// stack that does not exist: the stack is never created, the Workspace
// stalls with a message naming the stack and what to change, and the Stack
// is not Ready. Turning the option off (the fix the message suggests) gets
// the Stack deployed.
func TestUseLocalStackOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, target := newFileStack(t, "local", func(target string) string { return fileProgram("local", target, "created", 0) })
	ns, dir := s.Namespace, filepath.Dir(target)
	s.Spec.Stack, s.Spec.UseLocalStackOnly = "missing", true
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())

	g.Eventually(func(g Gomega) {
		ws := getWorkspace(g, ns, "local")
		g.Expect(ws.Spec.Stacks).To(HaveLen(1))
		g.Expect(ws.Spec.Stacks[0].Create).To(Equal(ptr.To(false)))
		stalled := apimeta.FindStatusCondition(ws.Status.Conditions, autov1alpha1.WorkspaceStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(stalled.Reason).To(Equal(autov1alpha1.WorkspaceReasonStackSetupFailed))
		g.Expect(stalled.Message).To(ContainSubstring(`selecting stack "missing"`))
		g.Expect(stalled.Message).To(ContainSubstring("set create: true"))
	}, opTimeout, 250*time.Millisecond).Should(Succeed(), func() string { return describe(getStack(g, ns, "local")) })

	got := waitStack(t, ns, "local", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		g.Expect(sreconcile.IsReady(s.Status.Conditions)).To(BeFalse())
		g.Expect(sreconcile.IsStalled(s.Status.Conditions)).To(BeTrue(), "the Stack must say a person has to act")
	})
	stalled := findCondition(got, "Stalled")
	g.Expect(stalled.Reason).To(Equal(pulumiv1.StalledWorkspaceFailedReason))
	g.Expect(stalled.Message).To(ContainSubstring(`selecting stack "missing"`))
	health, err := argocd.StackHealth(got)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(health.Status).To(Equal("Degraded"), health.Message)
	g.Expect(backendStacks(t, dir)).To(BeEmpty(), "useLocalStackOnly must never create the stack")
	_, err = os.Stat(target)
	g.Expect(os.IsNotExist(err)).To(BeTrue())

	// The fix: let the operator create the stack.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
	s.Spec.UseLocalStackOnly = false
	g.Expect(env.Client.Update(ctx, s)).To(Succeed())
	waitStack(t, ns, "local", opTimeout, ready)
	g.Expect(readFile(g, target)).To(Equal("created"))
	g.Expect(backendStacks(t, dir)).To(ConsistOf("missing"))
}

// targetsProgram has two independent files and a third that depends on
// the first.
func targetsProgram(dir string) string {
	return fmt.Sprintf(`name: targets
runtime: yaml
resources:
  first:
    type: stackyardtest:index:File
    properties:
      path: %[1]s/first.txt
      content: one
  second:
    type: stackyardtest:index:File
    properties:
      path: %[1]s/second.txt
      content: two
  derived:
    type: stackyardtest:index:File
    properties:
      path: %[1]s/derived.txt
      content: copy of ${first.content}
`, dir)
}

// TestTargets updates only the resources spec.targets names, by URN, and
// with targetDependents the resources that depend on them: the untargeted
// resource is never created.
func TestTargets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	dir := testenv.LiveDir(t)
	files := filepath.Join(dir, "files")
	urn := "urn:pulumi:dev::targets::stackyardtest:index:File::first"
	s := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "targets", Namespace: ns},
		Spec: shared.StackSpec{
			Stack:            "dev",
			Backend:          backendURL(t, dir),
			GitSource:        programSource(t, "targets", targetsProgram(files)),
			Targets:          []string{urn},
			TargetDependents: true,
		},
	}
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	s = waitStack(t, ns, "targets", opTimeout, ready)
	g.Expect(readFile(g, filepath.Join(files, "first.txt"))).To(Equal("one"))
	g.Expect(readFile(g, filepath.Join(files, "derived.txt"))).To(Equal("copy of one"), "a dependent of the target")
	_, err := os.Stat(filepath.Join(files, "second.txt"))
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "second is not targeted")

	var upd autov1alpha1.Update
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Status.LastUpdate.Name}, &upd)).To(Succeed())
	g.Expect(upd.Spec.Target).To(Equal([]string{urn}))
	g.Expect(upd.Spec.TargetDependents).To(Equal(ptr.To(true)))
	// The stack itself, first and derived.
	g.Expect(s.Status.History[0].Changes).To(HaveKeyWithValue("create", BeEquivalentTo(3)))
}

// TestEnvRefs sets the program's environment from envRefs, a literal and
// a Secret key: both variables reach the program (it writes its own
// environment to a file), the Secret's value reaches the Workspace only as
// a reference, never as the value.
func TestEnvRefs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// Pulumi YAML has no function to read an environment variable, but the
	// language host, which evaluates the program, can read its own
	// environment from /proc.
	s, target := newFileStack(t, "envs", func(target string) string {
		return fmt.Sprintf(`name: envs
runtime: yaml
resources:
  environ:
    type: stackyardtest:index:File
    properties:
      path: %s
      content:
        fn::readFile: /proc/self/environ
`, target)
	})
	ns := s.Namespace
	const secretValue = "env-secret-31337"
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns},
		StringData: map[string]string{"token": secretValue},
	})).To(Succeed())
	s.Spec.EnvRefs = map[string]shared.ResourceRef{
		"STACKYARD_GREETING": shared.NewLiteralResourceRef("hello from envRefs"),
		"STACKYARD_TOKEN":    shared.NewSecretResourceRef("creds", "token"),
	}
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	waitStack(t, ns, "envs", opTimeout, ready)
	environ := strings.Split(readFile(g, target), "\x00")
	g.Expect(environ).To(ContainElement("STACKYARD_GREETING=hello from envRefs"))
	g.Expect(environ).To(ContainElement("STACKYARD_TOKEN=" + secretValue))

	ws := getWorkspace(g, ns, "envs")
	g.Expect(ws.Spec.Env).To(ContainElement(corev1.EnvVar{Name: "STACKYARD_GREETING", Value: "hello from envRefs"}))
	g.Expect(ws.Spec.Env).To(ContainElement(corev1.EnvVar{Name: "STACKYARD_TOKEN", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "token"},
	}}))
	g.Expect(fmt.Sprintf("%+v", ws)).NotTo(ContainSubstring(secretValue))
}

// TestConfigRef reads stack configuration from a ConfigMap: a plain string,
// and with json: true a structured value (a list) that the program uses as
// a list.
func TestConfigRef(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	dir := testenv.LiveDir(t)
	g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns},
		Data: map[string]string{
			"greeting": "hello from a ConfigMap",
			"hosts":    `["alpha", "beta", "gamma"]`,
		},
	})).To(Succeed())
	project := fmt.Sprintf(`name: cfg
runtime: yaml
config:
  greeting:
    type: string
  hosts:
    type: array
    items:
      type: string
resources:
  greetingFile:
    type: stackyardtest:index:File
    properties:
      path: %[1]s/greeting.txt
      content: ${greeting}
  hostsFile:
    type: stackyardtest:index:File
    properties:
      path: %[1]s/hosts.txt
      content:
        fn::join:
          - "+"
          - ${hosts}
outputs:
  secondHost: ${hosts[1]}
`, dir)
	s := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: ns},
		Spec: shared.StackSpec{
			Stack:     "dev",
			Backend:   backendURL(t, dir),
			GitSource: programSource(t, "cfg", project),
			ConfigRef: map[string]shared.ConfigMapRef{
				"cfg:greeting": {Name: "settings", Key: "greeting"},
				"cfg:hosts":    {Name: "settings", Key: "hosts", JSON: ptr.To(true)},
			},
		},
	}
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	s = waitStack(t, ns, "cfg", opTimeout, ready)
	g.Expect(readFile(g, filepath.Join(dir, "greeting.txt"))).To(Equal("hello from a ConfigMap"))
	g.Expect(readFile(g, filepath.Join(dir, "hosts.txt"))).To(Equal("alpha+beta+gamma"))
	g.Expect(string(s.Status.Outputs["secondHost"].Raw)).To(Equal(`"beta"`))
}
