//go:build cluster

package cluster_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/programs/kubeprogram"
)

func promotionGVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "promotion.stackyard.dev", Version: "v1alpha1", Resource: resource}
}

// TestPipelineOnNode promotes the Kubernetes-provider program from a dev
// namespace to a prod namespace on the real node, each Stack's program
// running as the Stack's ServiceAccount in its workspace pod. A new
// commit becomes a release, which dev takes on its own. prod needs one
// approval from alice: the promotion previews prod first, and the
// preview alice reads shows the Deployment's change (its pod template's
// greeting, old and new) and the ConfigMap's replacement. alice, a real
// user to the API server (impersonated), approves the plan digest she
// read; the promotion runs it and prod's Deployment rolls.
func TestPipelineOnNode(t *testing.T) {
	c, img, ns, step := begin(t)
	ctx := t.Context()
	t.Cleanup(func() {
		for _, env := range []string{"dev", "prod"} {
			_ = c.cs.CoreV1().Namespaces().Delete(context.Background(), ns+"-"+env, metav1.DeleteOptions{})
		}
	})
	installed := kustomizeInstaller.install(t, img, ns)
	grantProgram(t, c, ns, workspaceSA)
	agent := providerImage(t, img)
	step("installed")

	stateDir := hostStateDir(t, "pipeline-state-")
	gs := gitserver.New(t)
	repo := gs.CreateRepo("web")
	v1 := repo.Commit("main", map[string]string{"Pulumi.yaml": kubeprogram.Project("one", false)})
	repoURL := serveGitOnNode(t, gs) + "/web.git"

	// The Stacks start at v1, where a new environment starts; from then
	// on only their stage moves them.
	// The operator's admission webhook, reached through its Service,
	// records who made each (config/webhook).
	self, err := c.cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range []string{"dev", "prod"} {
		s := programStack(t, ns, repoURL, v1, "web-"+env, agent, stateDir, ns+"-"+env)
		s.SetAnnotations(map[string]string{"promotion.stackyard.dev/authorized-stage": env})
		made := create(t, c.dyn, stackGVR, ns, s)
		if by := made.GetAnnotations()["promotion.stackyard.dev/edited-by"]; by != self.Status.UserInfo.Username {
			t.Errorf("Stack web-%s was stamped as edited by %q, want %q: %v", env, by, self.Status.UserInfo.Username, made.GetAnnotations())
		}
	}
	for _, env := range []string{"dev", "prod"} {
		waitStackState(t, c, ns, "web-"+env, 6*time.Minute, "the first commit deployed", succeededAt(v1))
	}
	step("dev and prod run the first commit")

	create(t, c.dyn, promotionGVR("pipelines"), ns, object("Pipeline", "web", map[string]any{
		"git":      map[string]any{"repoURL": repoURL, "branch": "main"},
		"interval": "5s",
	}))
	create(t, c.dyn, promotionGVR("stages"), ns, object("Stage", "dev", map[string]any{
		"pipeline":             "web",
		"stacks":               []any{map[string]any{"name": "web-dev"}},
		"sources":              map[string]any{"direct": true},
		"autoPromotionOptions": map[string]any{"enabled": true},
	}))
	create(t, c.dyn, promotionGVR("stages"), ns, object("Stage", "prod", map[string]any{
		"pipeline": "web",
		"stacks":   []any{map[string]any{"name": "web-prod"}},
		"sources":  map[string]any{"stages": []any{"dev"}},
		"approval": map[string]any{"required": int64(1), "from": []any{map[string]any{"user": "alice"}}},
	}))
	alice := grantApprover(t, c, ns, "prod", "alice")

	// A new greeting: dev takes it on its own.
	v2 := repo.Commit("main", map[string]string{"Pulumi.yaml": kubeprogram.Project("two", false)})
	r2 := "web-" + v2[:10]
	waitStackState(t, c, ns, "web-dev", 8*time.Minute, "dev deploying the second commit", succeededAt(v2))
	runningDeployment(t, c, ns+"-dev", "two")
	waitFor(t, c.dyn, promotionGVR("stages"), ns, "dev", 3*time.Minute, "dev to hold release "+r2, func(u *unstructured.Unstructured) bool {
		got, _, _ := unstructured.NestedString(u.Object, "status", "currentRelease", "name")
		return got == r2
	})
	step("dev took release %s on its own", r2)

	// prod, by hand (as the admin, who is recorded as the requester):
	// previewed, then waiting for alice.
	admin, err := c.cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	promo := create(t, c.dyn, promotionGVR("promotions"), ns, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "promotion.stackyard.dev/v1alpha1", "kind": "Promotion",
		"metadata": map[string]any{"generateName": "prod-"},
		"spec":     map[string]any{"stage": "prod", "release": r2, "requestedBy": admin.Status.UserInfo.Username, "reason": "ship the greeting"},
	}})
	name := promo.GetName()
	pending := waitFor(t, c.dyn, promotionGVR("promotions"), ns, name, 6*time.Minute, "the promotion to wait for an approval", func(u *unstructured.Unstructured) bool {
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		msg, _, _ := unstructured.NestedString(u.Object, "status", "message")
		if phase == "Failed" {
			t.Fatalf("promotion %s failed: %s", name, msg)
		}
		return phase == "Pending" && strings.Contains(msg, "waiting for approval")
	})
	digest, _, _ := unstructured.NestedString(pending.Object, "status", "planDigest")
	// Each Stack's preview is a StackPromotion the operator wrote, found by
	// the promotion it names.
	records, err := c.dyn.Resource(promotionGVR("stackpromotions")).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing the StackPromotions: %v", err)
	}
	var preview map[string]any
	for _, r := range records.Items {
		promotion, _, _ := unstructured.NestedString(r.Object, "promotion")
		stack, _, _ := unstructured.NestedString(r.Object, "stack")
		if promotion == name && stack == "web-prod" {
			preview, _, _ = unstructured.NestedMap(r.Object, "preview")
		}
	}
	if preview == nil {
		t.Fatalf("no StackPromotion of %s for web-prod with a preview among %d records", name, len(records.Items))
	}
	ops := map[string]string{}
	changes, _, _ := unstructured.NestedSlice(preview, "changes")
	for _, ch := range changes {
		m := ch.(map[string]any)
		typ, _ := m["type"].(string)
		op, _ := m["op"].(string)
		ops[typ] = op
	}
	if ops["kubernetes:apps/v1:Deployment"] != "update" || !strings.Contains(ops["kubernetes:core/v1:ConfigMap"], "replace") {
		t.Errorf("prod's preview: changes %v, want the Deployment updated and the ConfigMap replaced", changes)
	}
	// The values approvers read are in the plan Secret, not the status.
	plan, _, _ := unstructured.NestedString(preview, "plan")
	secret, err := c.cs.CoreV1().Secrets(ns).Get(ctx, plan, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the preview's plan Secret %q: %v", plan, err)
	}
	var diff struct {
		Resources []struct {
			Type       string
			Op         string
			Properties []struct{ Path, Old, New string }
		}
	}
	if err := json.Unmarshal(secret.Data["diff"], &diff); err != nil {
		t.Fatalf("the plan Secret's diff: %v\n%s", err, secret.Data["diff"])
	}
	greeting := false
	for _, r := range diff.Resources {
		for _, p := range r.Properties {
			greeting = greeting || (r.Type == "kubernetes:apps/v1:Deployment" && r.Op == "update" &&
				strings.Contains(p.Path, kubeprogram.TemplateAnnotation) && p.Old == `"one"` && p.New == `"two"`)
		}
	}
	if !greeting {
		t.Errorf("the value diff does not show the Deployment's greeting going from one to two:\n%s", secret.Data["diff"])
	}
	msg, _, _ := unstructured.NestedString(pending.Object, "status", "message")
	step("promotion %s previewed and waiting: %q; the Deployment's diff is in Secret %s", name, msg, plan)

	// alice approves what she read.
	whoami, err := alice.cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	create(t, alice.dyn, promotionGVR("approvals"), ns, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "promotion.stackyard.dev/v1alpha1", "kind": "Approval",
		"metadata": map[string]any{"generateName": name + "-"},
		"spec": map[string]any{
			"promotion": name, "stage": "prod", "planDigest": digest, "decision": "Approve",
			"user": whoami.Status.UserInfo.Username, "groups": toAny(whoami.Status.UserInfo.Groups),
			"comment": "the greeting changes, nothing else",
		},
	}})
	waitFor(t, c.dyn, promotionGVR("promotions"), ns, name, 8*time.Minute, "the promotion to succeed", func(u *unstructured.Unstructured) bool {
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		if phase == "Failed" {
			msg, _, _ := unstructured.NestedString(u.Object, "status", "message")
			t.Fatalf("promotion %s failed: %s", name, msg)
		}
		return phase == "Succeeded"
	})
	waitStackState(t, c, ns, "web-prod", time.Minute, "prod at the second commit", succeededAt(v2))
	runningDeployment(t, c, ns+"-prod", "two")
	step("approved by alice; prod runs %s and its Deployment rolled", r2)

	for _, env := range []string{"dev", "prod"} {
		if err := c.dyn.Resource(stackGVR).Namespace(ns).Delete(ctx, "web-"+env, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := c.dyn.Resource(stackGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("the Stacks were not finalized: %v", err)
	}
	installed.uninstall(t)
	waitNoLeftovers(t, c, installed.objects)
}

// object is a namespaced promotion.stackyard.dev object of kind.
func object(kind, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "promotion.stackyard.dev/v1alpha1", "kind": kind,
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
}

// create creates obj in ns and returns what the API server stored.
func create(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns string, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	out, err := dyn.Resource(gvr).Namespace(ns).Create(t.Context(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating %s %s%s: %v", obj.GetKind(), obj.GetName(), obj.GetGenerateName(), err)
	}
	return out
}

// waitFor polls the object until check passes and returns it.
func waitFor(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name string, timeout time.Duration, what string, check func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	var last *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = u
		return check(u), nil
	})
	if err != nil {
		t.Fatalf("%s %s/%s: waiting for %s: %v\n%s", gvr.Resource, ns, name, what, err, toYAML(last))
	}
	return last
}

// grantApprover gives user the approver's rights of docs/change-management.md
// on the stage, and returns clients that act as user (impersonated by the
// admin, so that the API server authenticates the request as user).
func grantApprover(t *testing.T, c *cluster, ns, stage, user string) *cluster {
	t.Helper()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: stage + "-approver", Namespace: ns},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"promotion.stackyard.dev"}, Resources: []string{"stages"}, ResourceNames: []string{stage}, Verbs: []string{"approve"}},
			{APIGroups: []string{"promotion.stackyard.dev"}, Resources: []string{"approvals"}, Verbs: []string{"create", "get", "list"}},
			{APIGroups: []string{"promotion.stackyard.dev"}, Resources: []string{"promotions", "stages"}, Verbs: []string{"get", "list"}},
		},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-" + user, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := c.cs.RbacV1().Roles(ns).Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.cs.RbacV1().RoleBindings(ns).Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"approvers"}}
	return &cluster{cs: kubernetes.NewForConfigOrDie(cfg), dyn: dynamic.NewForConfigOrDie(cfg)}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
