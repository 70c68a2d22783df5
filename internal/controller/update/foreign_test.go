package update

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// shardCache reads through the API server as a named shard's cache does:
// Stacks outside the shard are not there.
type shardCache struct {
	client.Client
	shard string
}

// Get hides the Stacks of other shards.
func (c shardCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if _, ok := obj.(*pulumiv1.Stack); ok && obj.GetLabels()["stackyard.dev/shard"] != c.shard {
		return apierrors.NewNotFound(pulumiv1.GroupVersion.WithResource("stacks").GroupResource(), key.Name)
	}
	return nil
}

// TestUngoverned decides, on the real API server, which Updates may run on
// a Stack's Workspace: a governed Stack's runs only its own, whether the
// cache holds the Stack or only the API server does (an Update labelled
// for a named shard, whose cache lacks the default shard's Stacks), and a
// Workspace whose Stack is gone runs none but that Stack's.
func TestUngoverned(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t, "ungoverned-")
	stack := func(name string, annotations map[string]string) *pulumiv1.Stack {
		s := &pulumiv1.Stack{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
			Spec:       shared.StackSpec{Stack: "dev", GitSource: &shared.GitSource{ProjectRepo: "https://git.example.invalid/x.git", Commit: strings.Repeat("a", 40)}},
		}
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	governed := stack("prod", map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: "prod"})
	free := stack("dev", nil)
	controlledBy := func(name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{*metav1.NewControllerRef(&pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid}},
			pulumiv1.GroupVersion.WithKind("Stack"))}
	}
	workspace := func(owners []metav1.OwnerReference) *autov1alpha1.Workspace {
		return &autov1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ws", OwnerReferences: owners}}
	}
	users := &autov1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-hand"}}
	own := &autov1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod-1", OwnerReferences: controlledBy(governed.Name, governed.UID)}}

	for _, tt := range []struct {
		name  string
		cache client.Client
		upd   *autov1alpha1.Update
		ws    *autov1alpha1.Workspace
		want  string // a part of the refusal; "" when the Update may run
	}{
		{"a Workspace of no Stack", env.Client, users, workspace(nil), ""},
		{"an ungoverned Stack's", env.Client, users, workspace(controlledBy(free.Name, free.UID)), ""},
		{"a governed Stack's, by hand", env.Client, users, workspace(controlledBy(governed.Name, governed.UID)), "which stage prod governs"},
		{"a governed Stack's, its own", env.Client, own, workspace(controlledBy(governed.Name, governed.UID)), ""},
		{"a governed Stack's, from a named shard", shardCache{Client: env.Client, shard: "blue"}, users,
			workspace(controlledBy(governed.Name, governed.UID)), "which stage prod governs"},
		{"a gone Stack's", env.Client, users, workspace(controlledBy("gone", "0b5e7e9a-0000-4000-8000-000000000000")), "Stack gone, which is gone"},
		{"a Stack's of the same name before it", env.Client, users, workspace(controlledBy(free.Name, "0b5e7e9a-0000-4000-8000-000000000001")), "Stack dev, which is gone"},
		{"a gone Stack's, its own", env.Client, &autov1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone-1",
			OwnerReferences: controlledBy("gone", "0b5e7e9a-0000-4000-8000-000000000000")}},
			workspace(controlledBy("gone", "0b5e7e9a-0000-4000-8000-000000000000")), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &Reconciler{client: tt.cache, reader: env.Client}
			got, err := r.ungoverned(ctx, tt.upd, tt.ws)
			if err != nil {
				t.Fatal(err)
			}
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("ungoverned = %q, want %q", got, tt.want)
			}
			if got != "" && !strings.HasPrefix(got, "spec.workspaceName: ") {
				t.Errorf("the refusal %q does not name the field", got)
			}
		})
	}
}

// TestCreateOwnedSecret: the outputs or plan Secret an Update's outcome
// goes into is taken as the operator's own, when it exists already, only
// if it is immutable, controlled by the Update, and holds what the
// operator would write. A Secret planted under its name (the name is the
// Update's, and the owner reference anyone may write) is refused with a
// note, so a plan and value diff of someone else's never become what a
// promotion's approvers are bound to.
func TestCreateOwnedSecret(t *testing.T) {
	ctx := context.Background()
	ns := env.NewNamespace(t, "owned-secret-")
	upd := &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1"},
		Spec:       autov1alpha1.UpdateSpec{WorkspaceName: "web", StackName: "dev", Type: autov1alpha1.PreviewType},
	}
	if err := env.Client.Create(ctx, upd); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{client: env.Client, reader: env.Client, scheme: env.Scheme}
	secret := func(name string, immutable bool, plan string) *corev1.Secret {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Immutable:  ptr.To(immutable),
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{autov1alpha1.PlanKey: []byte(plan)},
		}
		if err := controllerutil.SetControllerReference(upd, s, env.Scheme); err != nil {
			t.Fatal(err)
		}
		return s
	}
	create := func(s *corev1.Secret) (string, string) {
		t.Helper()
		name, note, err := r.createOwnedSecret(ctx, upd, s, "the plan was")
		if err != nil {
			t.Fatal(err)
		}
		return name, note
	}

	// Made here, then found again by a retry.
	for range 2 {
		if name, note := create(secret("web-1-plan", true, "the plan")); name != "web-1-plan" || note != "" {
			t.Fatalf("createOwnedSecret = %q, %q; want the Secret and no note", name, note)
		}
	}
	for _, tt := range []struct {
		name    string
		planted *corev1.Secret
	}{
		{"another plan", secret("planted-1", true, "a plan of someone else's")},
		{"the same plan, mutable", secret("planted-2", false, "the plan")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := env.Client.Create(ctx, tt.planted.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			name, note := create(secret(tt.planted.Name, true, "the plan"))
			if name != "" || note != "the plan was not recorded: Secret "+tt.planted.Name+" exists and is not the one this Update made" {
				t.Fatalf("createOwnedSecret over a planted Secret = %q, %q; want no name and a note", name, note)
			}
		})
	}
}
