//go:build gitops && argocd

package gitops

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/test/argocdrun"
	"github.com/stackyard/stackyard/test/testenv"
)

func init() {
	argocdRequired = argocdrun.Required()
	// Argo CD's Application and AppProject.
	argocdCRDs = []string{argocdrun.CRDDir()}
}

// gatedStage is the Stage prod of pipelineManifests with an approval
// gate: one person who did not ask must approve each promotion, a held
// change's too, so that a held change waits (Suspended) for a person.
const gatedStage = `apiVersion: promotion.stackyard.dev/v1alpha1
kind: Stage
metadata:
  name: prod
spec:
  pipeline: web
  sources:
    direct: true
  stacks:
  - name: web
  approval:
    required: 1
`

// TestArgoCDSync syncs a pipeline, its gated stage and a governed Stack
// from git with Argo CD's real application controller and repo server,
// set up as docs/argocd.md says: the health check from
// config/argocd/argocd-cm-patch.yaml, the Application's ignoreDifferences
// for the fields stackyard-promotion owns with ServerSideApply and
// RespectIgnoreDifferences, automated sync with self-heal, and a scoped
// identity (a cluster Secret with the token of argocd-stackyard, bound to
// stackyard-governor in the one namespace it syncs). It shows:
//   - Argo CD creates the objects and reads the Stack Progressing, then
//     Healthy, with the project's script;
//   - a promotion pins spec.commit, and neither self-heal nor a sync of a
//     new revision puts git's commit back;
//   - a config change in git reaches the Stack, which holds it: Argo CD
//     reads it Suspended, naming the stage, until a person approves the
//     stage's promotion of it, and then Healthy with the change deployed;
//   - a Stack that cannot deploy is Degraded, and so is its Application.
func TestArgoCDSync(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	ns := env.NewNamespace(t, "argocd-")
	g.Expect(env.InstallPeopleRoles(ctx)).To(Succeed())
	argo := argocdrun.Start(t, env, nil)

	f := newFixture(t, map[string]string{"prod/stage.yaml": gatedStage})
	program, deploy, c0, c1, backend, page, moved := f.program, f.deploy, f.c0, f.c1, f.backend, f.page, f.moved

	// Argo CD's scoped identity (docs/argocd.md, "A scoped role for Argo
	// CD"): a ServiceAccount of its namespace, a governor here and
	// nothing anywhere else.
	token, err := testenv.BoundToken(ctx, env.Client, argo.Namespace, "argocd-stackyard", ns, "stackyard-governor")
	g.Expect(err).NotTo(HaveOccurred())
	server, err := argo.AddCluster(ctx, "stackyard", env.TokenConfig(token), ns)
	g.Expect(err).NotTo(HaveOccurred())
	approverToken, err := testenv.BoundToken(ctx, env.Client, ns, "avery", ns, "stackyard-approver")
	g.Expect(err).NotTo(HaveOccurred())
	approver, err := client.New(env.TokenConfig(approverToken), client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())

	application := func(name, path string) *unstructured.Unstructured {
		return argo.Application(name, map[string]any{
			"source":      map[string]any{"repoURL": deploy.URL, "path": path, "targetRevision": "main"},
			"destination": map[string]any{"server": server, "namespace": ns},
			"ignoreDifferences": []any{map[string]any{
				"group": "pulumi.com", "kind": "Stack",
				"managedFieldsManagers": []any{promotionManager},
			}},
			"syncPolicy": map[string]any{
				"automated":   map[string]any{"selfHeal": true, "prune": true},
				"syncOptions": []any{"ServerSideApply=true", "RespectIgnoreDifferences=true"},
			},
		})
	}
	prodApp := application("prod", "prod")
	g.Expect(env.Client.Create(ctx, prodApp)).To(Succeed())

	// 1. Argo CD creates the objects; the Stack deploys v0 and Argo CD
	// reads it Progressing, then Healthy.
	seen := map[string]bool{}
	g.Eventually(func(g Gomega) {
		get(g, prodApp)
		h := resourceHealth(prodApp, "Stack", "web")
		seen[h.Status] = true
		g.Expect(h.Status).To(Equal("Healthy"), "%s; application: %s", h.Message, appSummary(prodApp))
	}).WithTimeout(opTimeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	// Before the sync creates it, Argo CD knows the Stack only from git.
	delete(seen, "")
	delete(seen, "Missing")
	g.Expect(seen).To(Equal(map[string]bool{"Progressing": true, "Healthy": true}), "the health Argo CD read on the Stack's way")
	g.Expect(readFile(t, page)).To(Equal("v0"))
	appSynced(t, prodApp, deploy.Head("main"), "Healthy")

	// 2. The Pipeline releases c1; a promotion pins it once a person
	// approves; neither self-heal nor the sync of a new revision takes
	// the pin back.
	release := releaseOf(t, ns, c1)
	g.Expect(env.Client.Create(ctx, &promotionv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod-r1"},
		Spec:       promotionv1alpha1.PromotionSpec{Stage: "prod", Release: release, RequestedBy: testUser, Reason: "ship v1"},
	})).To(Succeed())
	approve(t, approver, ns, "prod-r1", "avery")
	succeeded(t, ns, "prod-r1")
	g.Expect(readFile(t, page)).To(Equal("v1"))
	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stack), stack)).To(Succeed())
	g.Expect(stack.Spec.Commit).To(Equal(c1))
	g.Expect(testenv.FieldManagers(stack, "f:spec", "f:commit")).To(ConsistOf(promotionManager), "spec.commit belongs to the promotion alone")
	generation := stack.Generation
	deploy.Commit("main", map[string]string{"prod/README.md": "the prod stage\n"})
	appSynced(t, prodApp, deploy.Head("main"), "Healthy")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stack), stack)).To(Succeed())
	g.Expect(stack.Spec.Commit).To(Equal(c1), "Argo CD reverted the promoted commit")
	g.Expect(stack.Generation).To(Equal(generation), "Argo CD changed the Stack")

	// 3. A config change in git: Argo CD syncs it, the operator holds it,
	// Argo CD reads Suspended until a person approves the stage's
	// promotion of the change, which then deploys.
	deploy.Commit("main", map[string]string{"prod/stack.yaml": stackManifest(program.URL, c0, backend, moved)})
	g.Eventually(func(g Gomega) {
		get(g, prodApp)
		h := resourceHealth(prodApp, "Stack", "web")
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stack), stack)).To(Succeed())
		g.Expect(h.Status).To(Equal("Suspended"), "%s; application: %s; Stack generation %d, config %s, managers of spec.config %v, heldSpec %v, conditions %v",
			h.Message, appSummary(prodApp), stack.Generation, stack.Spec.Config, testenv.FieldManagers(stack, "f:spec", "f:config"), stack.Status.HeldSpec, stack.Status.Conditions)
		g.Expect(h.Message).To(ContainSubstring("prod"))
	}).WithTimeout(opTimeout).Should(Succeed(), "Argo CD never read the held change as Suspended")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stack), stack)).To(Succeed())
	g.Expect(stack.Status.HeldSpec).NotTo(BeNil())
	g.Expect(stack.Spec.Commit).To(Equal(c1), "the sync of the change reverted the promoted commit")
	g.Expect(readFile(t, page)).To(Equal("v1"), "the held change ran before its approval")
	held := heldPromotion(t, ns, "web")
	approve(t, approver, ns, held, "avery")
	succeeded(t, ns, held)
	g.Eventually(func() (string, error) { return readFileErr(moved) }).WithTimeout(opTimeout).Should(Equal("v1"))
	appSynced(t, prodApp, deploy.Head("main"), "Healthy")
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stack), stack)).To(Succeed())
	g.Expect(stack.Spec.Commit).To(Equal(c1))

	// 4. A Stack that cannot deploy: Degraded, and its Application too.
	brokenApp := application("broken", "broken")
	g.Expect(env.Client.Create(ctx, brokenApp)).To(Succeed())
	g.Eventually(func(g Gomega) {
		get(g, brokenApp)
		h := resourceHealth(brokenApp, "Stack", "broken")
		g.Expect(h.Status).To(Equal("Degraded"), "%s; application: %s", h.Message, appSummary(brokenApp))
		g.Expect(appHealth(brokenApp)).To(Equal("Degraded"))
	}).WithTimeout(opTimeout).Should(Succeed(), "Argo CD never read the stalled Stack as Degraded")
}

// health is an object's health as an Application's status records it.
type health struct{ Status, Message string }

// resourceHealth is the health Argo CD recorded in app's
// status.resources for the object of kind and name (the controller runs
// with --persist-resource-health).
func resourceHealth(app *unstructured.Unstructured, kind, name string) health {
	resources, _, _ := unstructured.NestedSlice(app.Object, "status", "resources")
	for _, r := range resources {
		m, _ := r.(map[string]any)
		if m["kind"] != kind || m["name"] != name {
			continue
		}
		status, _, _ := unstructured.NestedString(m, "health", "status")
		msg, _, _ := unstructured.NestedString(m, "health", "message")
		return health{status, msg}
	}
	return health{}
}

// appHealth is the Application's own health.
func appHealth(app *unstructured.Unstructured) string {
	s, _, _ := unstructured.NestedString(app.Object, "status", "health", "status")
	return s
}

// appSummary is the Application's sync state, health, conditions and last
// operation, for failure messages.
func appSummary(app *unstructured.Unstructured) string {
	sync, _, _ := unstructured.NestedString(app.Object, "status", "sync", "status")
	rev, _, _ := unstructured.NestedString(app.Object, "status", "sync", "revision")
	op, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "message")
	conds, _, _ := unstructured.NestedSlice(app.Object, "status", "conditions")
	return "sync " + sync + " at " + rev + ", health " + appHealth(app) + ", last operation: " + op + ", conditions: " + fmt.Sprint(conds)
}

// appSynced waits until the Application is Synced at revision sha, its
// health is appHealth and its last sync, if any, succeeded.
func appSynced(t *testing.T, app *unstructured.Unstructured, sha, want string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		get(g, app)
		sync, _, _ := unstructured.NestedString(app.Object, "status", "sync", "status")
		rev, _, _ := unstructured.NestedString(app.Object, "status", "sync", "revision")
		g.Expect(sync).To(Equal("Synced"), appSummary(app))
		g.Expect(rev).To(Equal(sha), appSummary(app))
		g.Expect(appHealth(app)).To(Equal(want), appSummary(app))
		if phase, found, _ := unstructured.NestedString(app.Object, "status", "operationState", "phase"); found {
			g.Expect(phase).To(Equal("Succeeded"), appSummary(app))
		}
	}).WithTimeout(opTimeout).Should(Succeed(), "Argo CD never synced revision %s", sha)
}

// heldPromotion waits for the stage's promotion of the change held on
// Stack stack and returns its name.
func heldPromotion(t *testing.T, ns, stack string) string {
	t.Helper()
	var name string
	NewWithT(t).Eventually(func(g Gomega) {
		var list promotionv1alpha1.PromotionList
		g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		for _, p := range list.Items {
			if p.Spec.HeldChange != nil && p.Spec.HeldChange.Stack == stack {
				name = p.Name
			}
		}
		g.Expect(name).NotTo(BeEmpty(), "no promotion of the change held on %s", stack)
	}).WithTimeout(opTimeout).Should(Succeed())
	return name
}

// approve waits for the promotion's preview and approves what it
// previewed, as the ServiceAccount ns/sa behind c (a stackyard-approver).
func approve(t *testing.T, c client.Client, ns, promotion, sa string) {
	t.Helper()
	g := NewWithT(t)
	p := &promotionv1alpha1.Promotion{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: promotion}, p)).To(Succeed())
		g.Expect(p.Status.PlanDigest).NotTo(BeEmpty(), "phase %s: %s", p.Status.Phase, p.Status.Message)
	}).WithTimeout(opTimeout).Should(Succeed(), "promotion %s was never previewed", promotion)
	g.Expect(c.Create(context.Background(), &promotionv1alpha1.Approval{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: promotion + "-" + sa},
		Spec: promotionv1alpha1.ApprovalSpec{
			Promotion: promotion, Stage: p.Spec.Stage, PlanDigest: p.Status.PlanDigest, Decision: promotionv1alpha1.Approve,
			User:   "system:serviceaccount:" + ns + ":" + sa,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		},
	})).To(Succeed())
}
