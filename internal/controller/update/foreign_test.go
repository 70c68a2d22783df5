package update

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
)

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
	r := &Reconciler{Client: env.Client, APIReader: env.Client, Scheme: env.Scheme}
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
