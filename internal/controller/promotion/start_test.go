package promotion

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/test/testenv"
)

// TestStartRechecksInputs: a Secret the Stack reads changes after
// reconcileInputs compared the inputs and before the approvals (listed
// live) were counted, so an approval of the old plan is counted. The
// start, after the count, compares again: the promotion stays Pending and
// waits to be previewed again, and nothing is pinned. The promotion suite
// met this once, on a loaded machine (TestApproveAgain).
func TestStartRechecksInputs(t *testing.T) {
	env, err := testenv.Start(testenv.Options{AddToScheme: []func(*k8sruntime.Scheme) error{
		clientgoscheme.AddToScheme, pulumiv1.AddToScheme, promotionv1alpha1.AddToScheme,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	ns := env.NewNamespace(t, "start-")
	c := env.Client
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-token"}, StringData: map[string]string{"token": "one"}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	stack := &pulumiv1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web",
		Annotations: map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: "prod"}}}
	stack.Spec.Stack = "web"
	stack.Spec.GitSource = &shared.GitSource{ProjectRepo: "https://git.example.com/web.git", Commit: strings.Repeat("a", 40)}
	stack.Spec.SecretRefs = map[string]shared.ResourceRef{"web:token": {
		SelectorType:     shared.ResourceSelectorSecret,
		ResourceSelector: shared.ResourceSelector{SecretRef: &shared.SecretSelector{Name: "web-token", Key: "token"}},
	}}
	if err := c.Create(ctx, stack); err != nil {
		t.Fatal(err)
	}
	inputs, err := change.StackDigest(ctx, c, stack)
	if err != nil {
		t.Fatal(err)
	}
	st := &promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"}}
	st.Spec.Pipeline, st.Spec.Stacks = "web", []promotionv1alpha1.StackBinding{{Name: "web"}}
	rel := &promotionv1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r2"}}
	rel.Spec.Commit.SHA = strings.Repeat("b", 40)
	p := &promotionv1alpha1.Promotion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "to-prod"}}
	p.Spec.Stage, p.Spec.Release = "prod", "r2"
	p.Status.Phase = promotionv1alpha1.PromotionPending
	previews := []promotionv1alpha1.StackPreview{{Name: "web", Round: 1, Inputs: inputs, Summary: &promotionv1alpha1.ChangeSummary{Update: 1}}}
	s := &session{r: &Reconciler{Client: c, APIReader: c}, p: p, stage: st, release: rel, members: change.Membership{Bindings: st.Spec.Stacks},
		recs: records{previews: previews}}

	// Unchanged: it starts.
	if _, err := s.startPromotion(ctx); err != nil || p.Status.Phase != promotionv1alpha1.PromotionRunning {
		t.Fatalf("unchanged inputs: %v, phase %s", err, p.Status.Phase)
	}

	// Changed between the comparison and the count: it does not.
	p.Status = promotionv1alpha1.PromotionStatus{Phase: promotionv1alpha1.PromotionPending}
	secret.StringData = map[string]string{"token": "two"}
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	_, err = s.startPromotion(ctx)
	var waiting *sreconcile.Waiting
	if !errors.As(err, &waiting) || !strings.Contains(err.Error(), "changed while the approvals were counted") {
		t.Fatalf("start after the inputs changed: %v, want a wait to preview again", err)
	}
	if p.Status.Phase != promotionv1alpha1.PromotionPending || p.Status.StartTime != nil || len(p.Status.Stacks) != 0 {
		t.Errorf("the promotion started: %+v", p.Status)
	}
}
