//go:build gitops

package gitops

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
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/test/argocd"
	"github.com/stackyard/stackyard/test/fluxkc"
	"github.com/stackyard/stackyard/test/fluxsc"
	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/testenv"
)

// opTimeout bounds a wait that includes Pulumi operations: a guard
// against a hang, not a measurement.
const opTimeout = 3 * time.Minute

// promotionManager is the field manager a promotion pins a Stack with
// (docs/argocd.md, docs/flux.md).
const promotionManager = "stackyard-promotion"

// ignorePinned is the Kustomization's spec.ignore that docs/flux.md
// prescribes: the fields a promotion writes on a Stack are left out of
// what kustomize-controller applies once the promotion owns them.
var ignorePinned = []any{map[string]any{
	"paths": []any{
		"/spec/commit",
		"/metadata/annotations/promotion.stackyard.dev~1plan",
		"/metadata/annotations/promotion.stackyard.dev~1plan-commit",
		"/metadata/annotations/promotion.stackyard.dev~1plan-inputs",
		"/metadata/annotations/pulumi.com~1reconciliation-request",
	},
	"target": map[string]any{"group": "pulumi.com", "kind": "Stack"},
}}

// stackManifest is the Stack web as git holds it: governed by stage prod,
// pinned to commit, writing its page to path.
func stackManifest(repoURL, commit, backend, path string) string {
	return fmt.Sprintf(`apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: web
  annotations:
    promotion.stackyard.dev/authorized-stage: prod
spec:
  stack: prod
  backend: %q
  projectRepo: %q
  commit: %q
  config:
    web:path: %q
`, backend, repoURL, commit, path)
}

// brokenManifest is an ungoverned Stack whose repository does not exist:
// it stalls.
func brokenManifest(repoURL, backend string) string {
	return fmt.Sprintf(`apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: broken
spec:
  stack: broken
  backend: %q
  projectRepo: %q
  branch: main
`, backend, repoURL)
}

// pipelineManifests are the Pipeline web, which makes a Release of each
// new commit of the program's main branch, and its Stage prod.
func pipelineManifests(repoURL string) map[string]string {
	return map[string]string{
		"prod/pipeline.yaml": fmt.Sprintf(`apiVersion: promotion.stackyard.dev/v1alpha1
kind: Pipeline
metadata:
  name: web
spec:
  git:
    repoURL: %q
    branch: main
`, repoURL),
		"prod/stage.yaml": `apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata:
  name: prod
spec:
  pipeline: web
  sources:
    direct: true
  stacks:
  - name: web
`,
	}
}

// TestFluxSync syncs a pipeline, its stage and a governed Stack from git
// with Flux's real controllers, as the ServiceAccount flux-sync bound to
// the shipped stackyard-governor role, and shows what docs/flux.md claims:
//   - Flux creates them, the Stack deploys, and Flux's own health check
//     (kstatus, `wait: true`) reads it Ready; the Argo CD health script
//     reads Progressing, then Healthy;
//   - a promotion pins spec.commit and a later sync, with the ignore rules
//     of docs/flux.md, leaves it;
//   - a change of the Stack's config in git reaches the Stack, which holds
//     it (Suspended) until the stage's promotion of it deploys it;
//   - a Stack that cannot deploy is Degraded, and Flux's Kustomization
//     says so.
func TestFluxSync(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	ns := env.NewNamespace(t, "gitops-")
	g.Expect(env.InstallPeopleRoles(ctx)).To(Succeed())
	sc, kc := fluxsc.Start(t, env), fluxkc.Start(t, env)

	f := newFixture(t, nil)
	program, deploy, c0, c1, backend, page, moved := f.program, f.deploy, f.c0, f.c1, f.backend, f.page, f.moved

	// Flux applies as flux-sync, a governor of the namespace: creating a
	// Stage and binding a Stack to it need govern.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flux-sync"}}
	g.Expect(env.Client.Create(ctx, sa)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "flux-sync"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "stackyard-governor"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "flux-sync"}},
	})).To(Succeed())

	source := sc.Own(&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fluxsc.APIVersion, "kind": "GitRepository",
		"metadata": map[string]any{"namespace": ns, "name": "deploy"},
		"spec":     map[string]any{"url": deploy.URL, "interval": "10s", "ref": map[string]any{"branch": "main"}},
	}})
	g.Expect(env.Client.Create(ctx, source)).To(Succeed())
	kustomization := func(name, path string) *unstructured.Unstructured {
		return kc.Own(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": fluxkc.APIVersion, "kind": "Kustomization",
			"metadata": map[string]any{"namespace": ns, "name": name},
			"spec": map[string]any{
				"interval": "10s", "path": path, "prune": true, "targetNamespace": ns,
				"sourceRef":          map[string]any{"kind": "GitRepository", "name": "deploy"},
				"serviceAccountName": "flux-sync",
				"wait":               true, "timeout": "2m",
				"ignore": ignorePinned,
			},
		}})
	}
	prodSync := kustomization("prod", "./prod")
	g.Expect(env.Client.Create(ctx, prodSync)).To(Succeed())

	// 1. Flux creates the objects; the Stack deploys v0 and reads
	// Progressing, then Healthy; the Kustomization's health check passes.
	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	seen := map[string]bool{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stack), stack)).To(Succeed())
		h, err := argocd.StackHealth(stack)
		g.Expect(err).NotTo(HaveOccurred())
		seen[h.Status] = true
		g.Expect(h.Status).To(Equal("Healthy"), h.Message)
	}).WithTimeout(opTimeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	g.Expect(seen).To(Equal(map[string]bool{"Progressing": true, "Healthy": true}), "the health the Stack showed on its way")
	g.Expect(readFile(t, page)).To(Equal("v0"))
	g.Expect(testenv.FieldManagers(stack, "f:metadata", "f:annotations", "f:promotion.stackyard.dev/authorized-stage")).To(ContainElement(fluxkc.FieldManager))
	ready(t, prodSync)

	// 2. The Pipeline releases c1, a promotion pins it, and syncs after it
	// leave the pin.
	release := releaseOf(t, ns, c1)
	g.Expect(env.Client.Create(ctx, &promotionv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod-r1"},
		Spec:       promotionv1alpha1.PromotionSpec{Stage: "prod", Release: release, RequestedBy: testUser, Reason: "ship v1"},
	})).To(Succeed())
	succeeded(t, ns, "prod-r1")
	g.Expect(readFile(t, page)).To(Equal("v1"))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stack), stack)).To(Succeed())
	g.Expect(stack.Spec.Commit).To(Equal(c1))
	g.Expect(testenv.FieldManagers(stack, "f:spec", "f:commit")).To(ConsistOf(promotionManager), "spec.commit belongs to the promotion alone")
	generation := stack.Generation
	// A new revision of the repository, and a sync asked for by hand.
	deploy.Commit("main", map[string]string{"prod/README.md": "the prod stage\n"})
	resynced(t, prodSync, deploy.Head("main"))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stack), stack)).To(Succeed())
	g.Expect(stack.Spec.Commit).To(Equal(c1), "the sync reverted the promoted commit")
	g.Expect(stack.Generation).To(Equal(generation), "the sync changed the Stack")

	// 3. A config change in git: Flux applies it, the operator holds it
	// (Suspended), the stage promotes it, and it deploys.
	deploy.Commit("main", map[string]string{"prod/stack.yaml": stackManifest(program.URL, c0, backend, moved)})
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stack), stack)).To(Succeed())
		g.Expect(stack.Status.HeldSpec).NotTo(BeNil())
		g.Expect(stack.Status.HeldSpec.Generation).To(Equal(stack.Generation))
	}).WithTimeout(opTimeout).Should(Succeed(), "the change in git was never held")
	g.Expect(stack.Spec.Commit).To(Equal(c1), "the sync of the change reverted the promoted commit")
	// Held, or already promoted: the stage asks for the promotion at once.
	var held argocd.Health
	held, err := argocd.StackHealth(stack)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(held.Status).To(BeElementOf("Suspended", "Progressing"), held.Message)
	g.Eventually(func(g Gomega) {
		var list promotionv1alpha1.PromotionList
		g.Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		var found bool
		for _, p := range list.Items {
			if p.Spec.HeldChange != nil && p.Spec.HeldChange.Stack == "web" {
				found = true
				g.Expect(p.Status.Phase).To(Equal(promotionv1alpha1.PromotionSucceeded), p.Status.Message)
			}
		}
		g.Expect(found).To(BeTrue(), "no promotion of the held change")
	}).WithTimeout(opTimeout).Should(Succeed())
	g.Eventually(func() (string, error) { return readFileErr(moved) }).WithTimeout(opTimeout).Should(Equal("v1"))
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stack), stack)).To(Succeed())
		h, err := argocd.StackHealth(stack)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(h.Status).To(Equal("Healthy"), h.Message)
	}).WithTimeout(opTimeout).Should(Succeed())
	g.Expect(stack.Spec.Commit).To(Equal(c1))
	resynced(t, prodSync, deploy.Head("main"))
	ready(t, prodSync)

	// 4. A Stack that cannot deploy: Degraded, and Flux's health check of
	// it fails, naming it.
	brokenSync := kustomization("broken", "./broken")
	unstructured.SetNestedField(brokenSync.Object, "20s", "spec", "timeout")
	g.Expect(env.Client.Create(ctx, brokenSync)).To(Succeed())
	broken := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "broken"}}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(broken), broken)).To(Succeed())
		h, err := argocd.StackHealth(broken)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(h.Status).To(Equal("Degraded"), h.Message)
	}).WithTimeout(opTimeout).Should(Succeed())
	g.Eventually(func(g Gomega) {
		get(g, brokenSync)
		cond := condition(brokenSync, "Ready")
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(cond.Message).To(ContainSubstring("Stack/" + ns + "/broken"))
	}).WithTimeout(opTimeout).Should(Succeed(), "Flux never reported the stalled Stack")
}

// fixture is what both GitOps tests sync: the program's repository, with
// commits c0 and c1 (writing "v0" and "v1"), and the deploy repository
// holding pipelineManifests, the governed Stack web at c0 writing page,
// and the Stack broken; moved is where a config change makes web write.
type fixture struct {
	program, deploy      *gitserver.Repo
	c0, c1               string
	backend, page, moved string
}

// newFixture makes the repositories, with the files of the deploy
// repository replaced by those of override.
func newFixture(t *testing.T, override map[string]string) fixture {
	t.Helper()
	git := gitserver.New(t)
	f := fixture{program: git.CreateRepo("web")}
	f.c0 = f.program.Commit("main", map[string]string{"Pulumi.yaml": testenv.FileProject("v0")})
	f.c1 = f.program.Commit("main", map[string]string{"Pulumi.yaml": testenv.FileProject("v1")})
	dir := testenv.LiveDir(t)
	f.backend = "file://" + filepath.Join(dir, "state")
	if err := os.MkdirAll(filepath.Join(dir, "state"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.page, f.moved = filepath.Join(dir, "page.txt"), filepath.Join(dir, "moved.txt")
	f.deploy = git.CreateRepo("deploy")
	files := pipelineManifests(f.program.URL)
	files["prod/stack.yaml"] = stackManifest(f.program.URL, f.c0, f.backend, f.page)
	files["broken/stack.yaml"] = brokenManifest(git.RepoURL("missing"), f.backend)
	for k, v := range override {
		files[k] = v
	}
	f.deploy.Commit("main", files)
	return f
}

// readFile reads the page a Stack's program wrote.
func readFile(t *testing.T, path string) string {
	t.Helper()
	s, err := readFileErr(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func readFileErr(path string) (string, error) {
	data, err := os.ReadFile(path)
	return string(data), err
}

// get reads obj afresh.
func get(g Gomega, obj *unstructured.Unstructured) {
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
}

// condition is the condition of type t of a Flux object.
func condition(obj *unstructured.Unstructured, t string) *metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	var conds []metav1.Condition
	for _, r := range raw {
		m, _ := r.(map[string]any)
		status, _ := m["status"].(string)
		typ, _ := m["type"].(string)
		msg, _ := m["message"].(string)
		reason, _ := m["reason"].(string)
		conds = append(conds, metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Message: msg, Reason: reason})
	}
	return apimeta.FindStatusCondition(conds, t)
}

// ready waits for the Kustomization to be Ready: applied, and its health
// check (kstatus, on every object it applied) passed.
func ready(t *testing.T, k *unstructured.Unstructured) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		get(g, k)
		cond := condition(k, "Ready")
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(metav1.ConditionTrue), cond.Message)
	}).WithTimeout(opTimeout).Should(Succeed(), "the Kustomization never became Ready")
}

// resynced asks Flux for a sync now (reconcile.fluxcd.io/requestedAt, as
// `flux reconcile` does) and waits until it has handled the request and
// applied revision sha of the repository.
func resynced(t *testing.T, k *unstructured.Unstructured, sha string) {
	t.Helper()
	g := NewWithT(t)
	token := time.Now().Format(time.RFC3339Nano)
	g.Eventually(func() error {
		live := k.DeepCopy()
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(live), live); err != nil {
			return err
		}
		ann := live.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann["reconcile.fluxcd.io/requestedAt"] = token
		live.SetAnnotations(ann)
		return env.Client.Update(context.Background(), live)
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		get(g, k)
		handled, _, _ := unstructured.NestedString(k.Object, "status", "lastHandledReconcileAt")
		applied, _, _ := unstructured.NestedString(k.Object, "status", "lastAppliedRevision")
		g.Expect(handled).To(Equal(token))
		g.Expect(strings.HasSuffix(applied, sha)).To(BeTrue(), "applied %s, want %s", applied, sha)
	}).WithTimeout(opTimeout).Should(Succeed(), "Flux never synced revision %s", sha)
}

// releaseOf waits for the Pipeline's Release of commit sha and returns its
// name.
func releaseOf(t *testing.T, ns, sha string) string {
	t.Helper()
	var release string
	NewWithT(t).Eventually(func(g Gomega) {
		var list promotionv1alpha1.ReleaseList
		g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		for _, r := range list.Items {
			if r.Spec.Commit.SHA == sha {
				release = r.Name
			}
		}
		g.Expect(release).NotTo(BeEmpty(), "the Pipeline made no Release of %s", sha)
	}).WithTimeout(opTimeout).Should(Succeed())
	return release
}

// succeeded waits for the promotion ns/name to end, and fails unless it
// succeeded.
func succeeded(t *testing.T, ns, name string) {
	t.Helper()
	p := &promotionv1alpha1.Promotion{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
		g.Expect(p.Status.Phase).To(BeElementOf(promotionv1alpha1.PromotionSucceeded, promotionv1alpha1.PromotionFailed, promotionv1alpha1.PromotionAborted),
			"%s; plan digest %s; approvals %+v", p.Status.Message, p.Status.PlanDigest, p.Status.Approvals)
	}).WithTimeout(opTimeout).Should(Succeed(), "promotion %s never ended", name)
	if p.Status.Phase != promotionv1alpha1.PromotionSucceeded {
		t.Fatalf("promotion %s: %s: %s", name, p.Status.Phase, p.Status.Message)
	}
}
