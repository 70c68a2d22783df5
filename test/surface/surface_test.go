package surface

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/testenv"
)

const opTimeout = 2 * time.Minute

// project is the program of every Stack here (testenv.FileProject): it
// writes version to the file its config names.
func project(version string) string { return testenv.FileProject(version) }

// pipelineFixture is a live pipeline: dev deploys every release on its
// own, prod (fed by dev) only with an approval nobody gives. prod's Stack
// reads a Secret, so that what it reads is part of the surface too.
type pipelineFixture struct {
	ns                string
	repo              *gitserver.Repo
	commits           []string // every commit the pipeline's governor made a release of
	devFile, prodFile string
}

func newPipeline(t *testing.T) *pipelineFixture {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	f := &pipelineFixture{ns: env.NewNamespace(t, "surface-"), repo: gitserver.New(t).CreateRepo("web")}
	c1 := f.repo.Commit("main", map[string]string{"Pulumi.yaml": project("v1")})
	f.commits = append(f.commits, c1)
	// Mallory's branch, unmerged: every string the attacks write is
	// "mallory", so a field that names a branch names one with a commit
	// nobody released.
	f.repo.Commit("mallory", map[string]string{"Pulumi.yaml": project("mallory")})
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "prod-token"},
		StringData: map[string]string{"token": "prod-credential"}})).To(Succeed())
	stack := func(name, stage string) (*pulumiv1.Stack, string) {
		dir := t.TempDir()
		state := filepath.Join(dir, "state")
		g.Expect(os.MkdirAll(state, 0o755)).To(Succeed())
		file := filepath.Join(dir, "page.txt")
		s := &pulumiv1.Stack{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Annotations: map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: stage}},
			Spec: shared.StackSpec{
				Stack: "dev", Backend: "file://" + state,
				Config:    map[string]apiextensionsv1.JSON{"web:path": {Raw: []byte(fmt.Sprintf("%q", file))}},
				GitSource: &shared.GitSource{ProjectRepo: f.repo.URL, Commit: c1},
			},
		}
		return s, file
	}
	dev, devFile := stack("web-dev", "dev")
	prod, prodFile := stack("web-prod", "prod")
	prod.Spec.EnvRefs = map[string]shared.ResourceRef{"PROD_TOKEN": {SelectorType: shared.ResourceSelectorSecret,
		ResourceSelector: shared.ResourceSelector{SecretRef: &shared.SecretSelector{Name: "prod-token", Key: "token"}}}}
	f.devFile, f.prodFile = devFile, prodFile
	for _, obj := range []client.Object{dev, prod,
		&promotionv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "web"},
			Spec: promotionv1alpha1.PipelineSpec{Git: promotionv1alpha1.GitSubscription{RepoURL: f.repo.URL, Branch: "main"},
				Interval: &metav1.Duration{Duration: time.Second}}},
		&promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "dev"}, Spec: promotionv1alpha1.StageSpec{
			Pipeline: "web", Stacks: []promotionv1alpha1.StackBinding{{Name: "web-dev"}},
			Sources:              promotionv1alpha1.ReleaseSources{Direct: true},
			AutoPromotionOptions: &promotionv1alpha1.AutoPromotionOptions{Enabled: true}}},
		&promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "prod"}, Spec: promotionv1alpha1.StageSpec{
			Pipeline: "web", Stacks: []promotionv1alpha1.StackBinding{{Name: "web-prod"}},
			Sources:              promotionv1alpha1.ReleaseSources{Stages: []string{"dev"}},
			Approval:             &promotionv1alpha1.ApprovalPolicy{Required: 1},
			AutoPromotionOptions: &promotionv1alpha1.AutoPromotionOptions{Enabled: true}}},
	} {
		g.Expect(env.Client.Create(ctx, obj)).To(Succeed(), "creating %T %s", obj, obj.GetName())
	}
	f.waitFile(t, devFile, "v1")
	f.waitFile(t, prodFile, "v1")
	// A second release reaches dev, and waits in prod for its approval:
	// the gated promotion an attacker would push through.
	f.release(t, "v2")
	g.Eventually(func(g Gomega) {
		var list promotionv1alpha1.PromotionList
		g.Expect(env.Client.List(ctx, &list, client.InNamespace(f.ns))).To(Succeed())
		g.Expect(slices.ContainsFunc(list.Items, func(p promotionv1alpha1.Promotion) bool {
			return p.Spec.Stage == "prod" && strings.HasPrefix(p.Status.Message, "waiting for approval")
		})).To(BeTrue(), "no promotion into prod waits for its approval")
	}, opTimeout, 250*time.Millisecond).Should(Succeed())
	return f
}

// release commits version on the branch the pipeline follows and waits
// for dev to deploy it.
func (f *pipelineFixture) release(t *testing.T, version string) {
	t.Helper()
	f.commits = append(f.commits, f.repo.Commit("main", map[string]string{"Pulumi.yaml": project(version)}))
	f.waitFile(t, f.devFile, version)
}

func (f *pipelineFixture) waitFile(t *testing.T, file, want string) {
	t.Helper()
	NewWithT(t).Eventually(func() (string, error) {
		data, err := os.ReadFile(file)
		return string(data), err
	}, opTimeout, 250*time.Millisecond).Should(Equal(want), "%s", file)
}

// baseline is what the invariants compare with: the Updates that had
// started before the attacks, and each Stack's last update.
type baseline struct {
	started    map[types.UID]bool
	lastUpdate map[string]string
}

func (f *pipelineFixture) baseline(g Gomega) baseline {
	b := baseline{started: map[types.UID]bool{}, lastUpdate: map[string]string{}}
	var updates autov1alpha1.UpdateList
	g.Expect(env.Client.List(context.Background(), &updates, client.InNamespace(f.ns))).To(Succeed())
	for _, u := range updates.Items {
		if !u.Status.StartTime.IsZero() {
			b.started[u.UID] = true
		}
	}
	var stacks pulumiv1.StackList
	g.Expect(env.Client.List(context.Background(), &stacks, client.InNamespace(f.ns))).To(Succeed())
	for _, s := range stacks.Items {
		if s.Status.LastUpdate != nil {
			b.lastUpdate[s.Name] = s.Status.LastUpdate.Name
		}
	}
	return b
}

// invariants are the four things no attack may change, read as an
// administrator.
func (f *pipelineFixture) invariants(g Gomega, b baseline, after string) {
	ctx := context.Background()
	// 1. The gated Stack's provider output and last successful commit.
	data, err := os.ReadFile(f.prodFile)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(Equal("v1"), "after %s: the test provider wrote prod's file", after)
	prod := &pulumiv1.Stack{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "web-prod"}, prod); err == nil {
		g.Expect(prod.Status.LastUpdate).NotTo(BeNil())
		g.Expect(prod.Status.LastUpdate.LastSuccessfulCommit).To(Equal(f.commits[0]), "after %s: prod's last successful commit", after)
	}
	// 2. No Stack deploys a commit its pipeline's governor did not make a
	// release of.
	var stacks pulumiv1.StackList
	g.Expect(env.Client.List(ctx, &stacks, client.InNamespace(f.ns))).To(Succeed())
	for _, s := range stacks.Items {
		if lu := s.Status.LastUpdate; lu != nil && lu.LastSuccessfulCommit != "" {
			g.Expect(f.commits).To(ContainElement(lu.LastSuccessfulCommit), "after %s: Stack %s deployed a commit nobody released", after, s.Name)
		}
	}
	// 3. No operation ran in a Workspace the operator made but its
	// maker's; none ran in prod's but prod's own.
	var updates autov1alpha1.UpdateList
	g.Expect(env.Client.List(ctx, &updates, client.InNamespace(f.ns))).To(Succeed())
	started := map[string]bool{}
	for _, u := range updates.Items {
		if u.Status.StartTime.IsZero() || b.started[u.UID] {
			continue
		}
		started[u.Name] = true
		ws := &autov1alpha1.Workspace{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: u.Spec.WorkspaceName}, ws)
		if apierrors.IsNotFound(err) {
			continue // its Workspace is gone; its maker is checked below for prod
		}
		g.Expect(err).NotTo(HaveOccurred())
		if m := change.MakerOf(ws); m != nil {
			g.Expect(change.MakerOf(&u)).To(Equal(m), "after %s: Update %s ran in workspace %s, which %s made", after, u.Name, ws.Name, m)
		}
		if u.Spec.WorkspaceName == "web-prod" {
			g.Expect(u.Spec.Type).NotTo(Equal(autov1alpha1.UpType), "after %s: an up ran on prod (%s)", after, u.Name)
			g.Expect(u.Spec.Type).NotTo(Equal(autov1alpha1.DestroyType), "after %s: a destroy ran on prod (%s)", after, u.Name)
		}
	}
	// 4. No record claims an operation that did not run.
	for _, s := range stacks.Items {
		lu := s.Status.LastUpdate
		if lu == nil || lu.Name == b.lastUpdate[s.Name] {
			continue
		}
		u := &autov1alpha1.Update{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: lu.Name}, u)).To(Succeed(),
			"after %s: Stack %s records Update %s, which does not exist", after, s.Name, lu.Name)
		g.Expect(u.Status.StartTime.IsZero()).To(BeFalse(), "after %s: Stack %s records Update %s, which never ran", after, s.Name, lu.Name)
	}
}

// resource is one kind the operator reads, as the API server serves it.
type resource struct {
	gr     schema.GroupResource
	gvk    schema.GroupVersionKind
	schema *apiextensionsv1.JSONSchemaProps // nil for a kind of Kubernetes'
}

// attack is one mutation, made alone as the attacker.
type attack struct {
	what string
	do   func(ctx context.Context, c client.Client) error
}

// TestAttackSurface walks the derived surface as Mallory, a ServiceAccount
// authenticated by a bearer token that holds every ordinary verb on every
// namespaced kind the operator reads, and on its status, but none of
// govern, approve, record or autopromote.
func TestAttackSurface(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newPipeline(t)

	schemas := crdSchemas(t)
	var resources []resource
	var rules []rbacv1.PolicyRule
	for _, gr := range readResources(t) {
		mapping, err := restMapping(gr)
		g.Expect(err).NotTo(HaveOccurred(), "%s", gr)
		if mapping.Scope.Name() != apimeta.RESTScopeNameNamespace {
			continue // an ordinary user holds rights in a namespace only
		}
		resources = append(resources, resource{gr: gr, gvk: mapping.GroupVersionKind, schema: schemas[gr]})
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{gr.Group}, Resources: []string{gr.Resource, gr.Resource + "/status"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}})
	}
	// Her own client, authenticated by her bearer token only, without
	// client-go's default rate limit: thousands of requests follow.
	token, err := testenv.UserToken(ctx, env.Client, f.ns, "mallory", rules...)
	g.Expect(err).NotTo(HaveOccurred())
	mallory, err := client.New(&rest.Config{Host: env.Config.Host, BearerToken: token, QPS: -1,
		TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}}, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	keys := metadataKeys(t)

	prod := &pulumiv1.Stack{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "web-prod"}, prod)).To(Succeed())
	b := f.baseline(g)
	f.invariants(g, b, "nothing")

	var total, accepted int
	covered := map[string]int{}
	run := func(r resource, attacks []attack) {
		start, batch := time.Now(), 0
		defer func() {
			t.Logf("%s: %d attacks, %d accepted, in %s", r.gr, len(attacks), batch, time.Since(start).Round(time.Millisecond))
		}()
		for _, a := range attacks {
			err := a.do(ctx, mallory)
			total++
			covered[r.gr.String()]++
			switch {
			case err == nil:
				accepted++
				batch++
				if testing.Verbose() {
					t.Logf("accepted: %s", a.what)
				}
			case !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) && !apierrors.IsNotFound(err) &&
				!apierrors.IsConflict(err) && !apierrors.IsBadRequest(err) && !apierrors.IsAlreadyExists(err):
				t.Errorf("%s: neither done nor refused: %v", a.what, err)
			}
		}
		if batch > 0 {
			// What the API server accepted reaches the controllers within
			// moments; no event marks "nothing happened", so the
			// invariants must hold for a while after each kind, bounded on
			// purpose.
			g.Consistently(func(g Gomega) { f.invariants(g, b, r.gr.String()) }, 3*time.Second, 250*time.Millisecond).Should(Succeed())
		}
	}
	// Every kind's claims, fields and objects of her own first, while the
	// pipeline is whole; the deletions last.
	deletions := map[string][]attack{}
	for _, r := range resources {
		attacks, deletes := attacksOn(ctx, t, f.ns, r, keys, prod)
		deletions[r.gr.String()] = deletes
		run(r, attacks)
	}
	for _, r := range resources {
		run(r, deletions[r.gr.String()])
	}
	t.Logf("%d mutations over %d kinds, %d accepted by the API server: %v", total, len(resources), accepted, covered)
	for _, r := range resources {
		g.Expect(covered[r.gr.String()]).NotTo(BeZero(), "no attack on %s", r.gr)
	}
	g.Expect(total).To(BeNumerically(">", 500), "the surface is smaller than the schemas say")
	g.Consistently(func(g Gomega) { f.invariants(g, b, "all of them") }, 3*time.Second, 250*time.Millisecond).Should(Succeed())
}

// restMapping is how the API server serves gr.
func restMapping(gr schema.GroupResource) (*apimeta.RESTMapping, error) {
	gvk, err := env.Client.RESTMapper().KindFor(gr.WithVersion(""))
	if err != nil {
		return nil, err
	}
	return env.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
}

// attacksOn lists the attacks on every object of r in ns, in the order an
// attacker would take them: claims first (labels, annotations, owner
// references), then each field of the spec and of the status, then
// objects of her own made after them (copies keeping their owner
// references or not, and under prod's name); and, apart, the deletions.
func attacksOn(ctx context.Context, t *testing.T, ns string, r resource, keys []string, prod *pulumiv1.Stack) (attacks, deletions []attack) {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(r.gvk.GroupVersion().WithKind(r.gvk.Kind + "List"))
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatalf("listing %s: %v", r.gr, err)
	}
	objs := list.Items
	sort.Slice(objs, func(i, j int) bool { return objs[i].GetName() < objs[j].GetName() })
	var claims, fieldsOf, creates, deletes []attack
	patch := func(obj *unstructured.Unstructured, sub, what string, data []byte) attack {
		key := client.ObjectKeyFromObject(obj)
		return attack{what: fmt.Sprintf("%s %s: %s", r.gvk.Kind, key.Name, what), do: func(ctx context.Context, c client.Client) error {
			target := &unstructured.Unstructured{}
			target.SetGroupVersionKind(r.gvk)
			target.SetNamespace(key.Namespace)
			target.SetName(key.Name)
			p := client.RawPatch(types.MergePatchType, data)
			if sub == "status" {
				return c.Status().Patch(ctx, target, p)
			}
			return c.Patch(ctx, target, p)
		}}
	}
	metadata := func(v map[string]any) []byte {
		data, _ := json.Marshal(map[string]any{"metadata": v})
		return data
	}
	makers := []schema.GroupVersionKind{
		pulumiv1.GroupVersion.WithKind("Stack"), promotionv1alpha1.GroupVersion.WithKind("Promotion"),
		promotionv1alpha1.GroupVersion.WithKind("Pipeline"), {Group: "example.com", Version: "v1", Kind: "Stack"},
		autov1alpha1.GroupVersion.WithKind("Workspace"),
	}
	for i := range objs {
		obj := &objs[i]
		for _, k := range keys {
			for _, in := range []string{"annotations", "labels"} {
				for _, v := range []any{"dev", nil} {
					claims = append(claims, patch(obj, "", fmt.Sprintf("%s %s=%v", in, k, v), metadata(map[string]any{in: map[string]any{k: v}})))
				}
			}
		}
		for _, m := range makers {
			ref := map[string]any{"apiVersion": m.GroupVersion().String(), "kind": m.Kind, "name": prod.Name, "uid": string(prod.UID), "controller": true}
			claims = append(claims, patch(obj, "", "controller "+m.String(), metadata(map[string]any{"ownerReferences": []any{ref}})))
		}
		claims = append(claims, patch(obj, "", "no owner references", metadata(map[string]any{"ownerReferences": nil})))
		if r.schema != nil {
			for _, top := range []string{"spec", "status"} {
				p, ok := r.schema.Properties[top]
				if !ok {
					continue
				}
				sub := ""
				if top == "status" {
					sub = "status"
				}
				for _, fl := range fields(&p, []string{top}) {
					fieldsOf = append(fieldsOf, patch(obj, sub, fl.String(), fl.mergePatch()))
				}
			}
		} else {
			// A kind of Kubernetes': its data, key by key.
			for _, k := range sortedKeys(obj.Object["data"]) {
				v := base64.StdEncoding.EncodeToString([]byte("mallory"))
				if r.gvk.Kind == "ConfigMap" {
					v = "mallory"
				}
				data, _ := json.Marshal(map[string]any{"data": map[string]any{k: v}})
				fieldsOf = append(fieldsOf, patch(obj, "", "data."+k, data))
			}
		}
		for j, keepOwners := range []bool{true, false} {
			copied := obj.DeepCopy()
			unstructured.RemoveNestedField(copied.Object, "status")
			unstructured.RemoveNestedField(copied.Object, "metadata", "resourceVersion")
			unstructured.RemoveNestedField(copied.Object, "metadata", "uid")
			unstructured.RemoveNestedField(copied.Object, "metadata", "creationTimestamp")
			unstructured.RemoveNestedField(copied.Object, "metadata", "managedFields")
			unstructured.RemoveNestedField(copied.Object, "metadata", "finalizers")
			if !keepOwners {
				unstructured.RemoveNestedField(copied.Object, "metadata", "ownerReferences")
			}
			copied.SetName(fmt.Sprintf("mallory-%s-%d", strings.ToLower(obj.GetName()), j))
			if len(copied.GetName()) > 63 {
				copied.SetName(copied.GetName()[:63])
			}
			what := fmt.Sprintf("%s %s: a copy, owner references kept %v", r.gvk.Kind, obj.GetName(), keepOwners)
			creates = append(creates, attack{what: what, do: func(ctx context.Context, c client.Client) error {
				return c.Create(ctx, copied.DeepCopy())
			}})
		}
		key := client.ObjectKeyFromObject(obj)
		deletes = append(deletes, attack{what: fmt.Sprintf("%s %s: deleted", r.gvk.Kind, key.Name), do: func(ctx context.Context, c client.Client) error {
			target := &unstructured.Unstructured{}
			target.SetGroupVersionKind(r.gvk)
			target.SetNamespace(key.Namespace)
			target.SetName(key.Name)
			return c.Delete(ctx, target)
		}})
	}
	if len(objs) == 0 {
		// None to copy: one made from its schema (or, for a kind of
		// Kubernetes', the least object it accepts), under prod's name
		// and claiming prod's Stack, as an attacker would make it first.
		content := minimal[r.gvk.Kind]
		if r.schema != nil {
			content = synthesize(r.schema)
		}
		if content == nil {
			t.Fatalf("the operator reads %s, and no attack makes one: add its least object to minimal", r.gr)
		}
		obj := &unstructured.Unstructured{Object: jsonCopy(content)}
		obj.SetGroupVersionKind(r.gvk)
		obj.SetNamespace(ns)
		obj.SetName(prod.Name)
		obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: pulumiv1.GroupVersion.String(), Kind: "Stack",
			Name: prod.Name, UID: prod.UID, Controller: new(true)}})
		creates = append(creates, attack{what: r.gvk.Kind + " made first under prod's name", do: func(ctx context.Context, c client.Client) error {
			return c.Create(ctx, obj.DeepCopy())
		}})
	}
	return slices.Concat(claims, fieldsOf, creates), deletes
}

// minimal is the least object of each kind of Kubernetes' the operator
// reads that the API server accepts, for the kinds no object of which
// exists to copy. A kind the operator reads and this lacks fails the test.
var minimal = map[string]map[string]any{
	"ConfigMap": {"data": map[string]any{"token": "mallory"}},
	"Secret":    {"stringData": map[string]any{"token": "mallory"}},
	"PersistentVolumeClaim": {"spec": map[string]any{"accessModes": []any{"ReadWriteOnce"},
		"resources": map[string]any{"requests": map[string]any{"storage": "1Mi"}}}},
	"Pod":     {"spec": map[string]any{"containers": []any{map[string]any{"name": "mallory", "image": "mallory"}}}},
	"Service": {"spec": map[string]any{"ports": []any{map[string]any{"port": 80}}}},
	"StatefulSet": {"spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "mallory"}},
		"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "mallory"}},
			"spec": map[string]any{"containers": []any{map[string]any{"name": "mallory", "image": "mallory"}}}}}},
	"Job": {"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"restartPolicy": "Never",
		"containers": []any{map[string]any{"name": "mallory", "image": "mallory"}}}}}},
}

// jsonCopy copies a JSON-shaped value through JSON, so that its numbers
// become float64, which unstructured objects can deep-copy.
func jsonCopy(m map[string]any) map[string]any {
	data, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return out
}

func sortedKeys(v any) []string {
	m, _ := v.(map[string]any)
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// synthesize is an object with every field s requires, of its type.
func synthesize(s *apiextensionsv1.JSONSchemaProps) map[string]any {
	out := map[string]any{}
	for _, name := range s.Required {
		p := s.Properties[name]
		out[name] = valueOf(&p)
	}
	if spec, ok := s.Properties["spec"]; ok {
		if _, set := out["spec"]; !set {
			out["spec"] = valueOf(&spec)
		}
	}
	return out
}

func valueOf(s *apiextensionsv1.JSONSchemaProps) any {
	if len(s.Enum) > 0 {
		var v any
		_ = json.Unmarshal(s.Enum[0].Raw, &v)
		return v
	}
	switch s.Type {
	case "string":
		return "mallory"
	case "integer", "number":
		return 1
	case "boolean":
		return false
	case "array":
		return []any{}
	case "object":
		return synthesize(s)
	}
	return "mallory"
}
