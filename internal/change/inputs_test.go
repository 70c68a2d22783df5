package change

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// TestReferencedObjects finds the Secrets and ConfigMaps named by kind in
// the Stack's fields and in the shapes the API references them in
// anywhere else: ResourceRefs (git auth included) and the workspace
// template's env, envFrom and pod volumes.
func TestReferencedObjects(t *testing.T) {
	spec := &shared.StackSpec{
		AccessTokenSecret: "token",
		Envs:              []string{"env-cm"},
		SecretEnvs:        []string{"creds"},
		EnvRefs:           map[string]shared.ResourceRef{"A": shared.NewSecretResourceRef("creds", "a"), "B": shared.NewEnvResourceRef("B")},
		ConfigRef:         map[string]shared.ConfigMapRef{"web:x": {Name: "settings", Key: "x"}, "web:y": {Name: "settings", Key: "y"}},
		SecretRefs:        map[string]shared.ResourceRef{"web:pw": shared.NewSecretResourceRef("db", "pw")},
		GitSource: &shared.GitSource{
			GitAuthSecret: "git-legacy",
			GitAuth:       &shared.GitAuthConfig{PersonalAccessToken: ptrTo(shared.NewSecretResourceRef("git-token", "t"))},
		},
		WorkspaceTemplate: &autov1alpha1.WorkspaceTemplate{Spec: &autov1alpha1.WorkspaceSpecTemplate{
			Env: []corev1.EnvVar{
				{Name: "K", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "tpl-secret"}, Key: "k"}}},
				{Name: "C", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "tpl-cm"}, Key: "c"}}},
			},
			EnvFrom: []corev1.EnvFromSource{
				{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "tpl-env-secret"}}},
				{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "tpl-env-cm"}}},
			},
		}},
	}
	want := []ObjectRef{
		{"ConfigMap", "env-cm"}, {"ConfigMap", "settings"}, {"ConfigMap", "tpl-cm"}, {"ConfigMap", "tpl-env-cm"},
		{"Secret", "creds"}, {"Secret", "db"}, {"Secret", "git-legacy"}, {"Secret", "git-token"},
		{"Secret", "token"}, {"Secret", "tpl-env-secret"}, {"Secret", "tpl-secret"},
	}
	if got := ReferencedObjects(spec); !slices.Equal(got, want) {
		t.Errorf("ReferencedObjects =\n%v\nwant\n%v", got, want)
	}
	// A spec without a git source (a Program's, or a review stack's
	// template, whose source the operator sets) has no git Secret.
	bare := &shared.StackSpec{SecretEnvs: []string{"creds"}}
	if got := ReferencedObjects(bare); !slices.Equal(got, []ObjectRef{{"Secret", "creds"}}) {
		t.Errorf("ReferencedObjects without a git source = %v", got)
	}
}

// TestReferencedObjectsInVolumes finds Secrets and ConfigMaps mounted by
// the pod template, directly and projected, and its image pull Secrets.
func TestReferencedObjectsInVolumes(t *testing.T) {
	doc := map[string]any{"podTemplate": map[string]any{"spec": map[string]any{
		"imagePullSecrets": []any{map[string]any{"name": "pull"}},
		"volumes": []any{
			map[string]any{"name": "a", "secret": map[string]any{"secretName": "mounted"}},
			map[string]any{"name": "b", "configMap": map[string]any{"name": "mounted-cm"}},
			map[string]any{"name": "c", "projected": map[string]any{"sources": []any{
				map[string]any{"secret": map[string]any{"name": "projected"}},
				map[string]any{"configMap": map[string]any{"name": "projected-cm"}},
			}}},
		},
	}}}
	var got []ObjectRef
	walkReferences(doc, func(kind string, names ...string) {
		for _, n := range names {
			if n != "" {
				got = append(got, ObjectRef{kind, n})
			}
		}
	})
	for _, want := range []ObjectRef{{"Secret", "pull"}, {"Secret", "mounted"}, {"ConfigMap", "mounted-cm"}, {"Secret", "projected"}, {"ConfigMap", "projected-cm"}} {
		if !slices.Contains(got, want) {
			t.Errorf("%v not found in %v", want, got)
		}
	}
}

// TestStackDigest changes with every input but the commit: the spec, and
// each object the Stack reads, also when it appears or disappears.
func TestStackDigest(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"}, Data: map[string][]byte{"a": []byte("1")}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(creds).Build()
	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: shared.StackSpec{
		Stack: "prod", GitSource: &shared.GitSource{ProjectRepo: "https://example.com/r.git", Commit: "aaaa"},
		SecretEnvs: []string{"creds"}, Envs: []string{"settings"},
	}}
	digest := func() string {
		t.Helper()
		d, err := StackDigest(ctx, c, stack)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	before := digest()
	stack.Spec.Commit = "bbbb"
	if digest() != before {
		t.Error("the commit changed the digest: a promotion's own pin would look like a change")
	}
	seen := map[string]bool{before: true}
	changed := func(what string) {
		t.Helper()
		d := digest()
		if seen[d] {
			t.Errorf("%s did not change the digest", what)
		}
		seen[d] = true
	}
	stack.Spec.Refresh = true
	changed("spec.refresh")
	creds.Data["a"] = []byte("2")
	if err := c.Update(ctx, creds); err != nil {
		t.Fatal(err)
	}
	changed("an update of Secret creds")
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "settings"}}); err != nil {
		t.Fatal(err)
	}
	changed("ConfigMap settings appearing")
	if err := c.Delete(ctx, creds); err != nil {
		t.Fatal(err)
	}
	changed("Secret creds disappearing")
}

// TestPinDigest binds the inputs and the plan together.
func TestPinDigest(t *testing.T) {
	a, _ := PinDigest("sha256:1", PlanDigest(&corev1.Secret{Data: map[string][]byte{autov1alpha1.PlanKey: []byte("p")}}))
	b, _ := PinDigest("sha256:1", PlanDigest(&corev1.Secret{Data: map[string][]byte{autov1alpha1.PlanKey: []byte("q")}}))
	c, _ := PinDigest("sha256:2", PlanDigest(&corev1.Secret{Data: map[string][]byte{autov1alpha1.PlanKey: []byte("p")}}))
	d, _ := PinDigest("sha256:1", PlanDigest(nil))
	if a == b || a == c || a == d || b == c || b == d || c == d {
		t.Errorf("pin digests not distinct: %s %s %s %s", a, b, c, d)
	}
}

// TestParsePinRequest reads back what PinRequest writes, and nothing else.
func TestParsePinRequest(t *testing.T) {
	name, uid, ok := ParsePinRequest(PinRequest("to-prod-1", "0d9e-11"))
	if !ok || name != "to-prod-1" || uid != "0d9e-11" {
		t.Errorf("ParsePinRequest(PinRequest) = %q, %q, %v", name, uid, ok)
	}
	for _, bad := range []string{"", "promotion/", "promotion/x", "promotion/x/", "promotion//u", "receiver/x/y", "2026-11-28T00:00:00Z"} {
		if _, _, ok := ParsePinRequest(bad); ok {
			t.Errorf("ParsePinRequest(%q) took it for a pin", bad)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
