package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/internal/change"
	"github.com/stackyard/stackyard/internal/pipelinectl"
	"github.com/stackyard/stackyard/internal/valuediff"
)

// reviewClient is a pipelinectl.Client over an in-memory API holding a
// promotion waiting for approval, with a plan Secret holding a value
// diff. The prompt's logic is what is tested here; the review's
// reading on a real API server is tested in the promotion suite
// (TestValueDiff, TestSourceChange).
func reviewClient(t *testing.T) *pipelinectl.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, promotionv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	diff, err := valuediff.Encode(valuediff.Diff{Resources: []valuediff.Resource{{URN: "urn:pulumi:prod::web::t::db", Op: "replace",
		Properties: []valuediff.Property{{Path: "size", Kind: "update", Old: "1", New: "2", Replaces: true}}}}})
	if err != nil {
		t.Fatal(err)
	}
	p := &promotionv1alpha1.Promotion{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "to-prod", UID: "uid-to-prod"},
		Spec:       promotionv1alpha1.PromotionSpec{Stage: "prod", Release: "r2", RequestedBy: "rita"},
		Status: promotionv1alpha1.PromotionStatus{Phase: promotionv1alpha1.PromotionPending, PlanDigest: "sha256:aaaa",
			Message: "waiting for approval: 0 of 1"},
	}
	rec := change.NewStackPromotion(p, "web")
	rec.Preview = &promotionv1alpha1.StackPreview{Name: "web", Plan: "to-prod-web.plan",
		Summary: &promotionv1alpha1.ChangeSummary{Replace: 1},
		Changes: []promotionv1alpha1.ResourceChange{{URN: "urn:pulumi:prod::web::t::db", Op: "replace", Properties: []string{"size"}}}}
	plan := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "to-prod-web.plan"}, Data: map[string][]byte{autov1alpha1.DiffKey: diff}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(p, rec, plan).WithStatusSubresource(p).
		WithIndex(&promotionv1alpha1.StackPromotion{}, change.RecordPromotionIndex, change.RecordPromotion).Build()
	return &pipelinectl.Client{Client: c, Namespace: "ns"}
}

// TestConfirm: approve shows the review, asks on a terminal, goes on only
// on yes, and returns the plan digest it showed; without a terminal it
// shows the review and goes on.
func TestConfirm(t *testing.T) {
	c := reviewClient(t)
	for _, tt := range []struct {
		name     string
		terminal bool
		answer   string
		ok       bool
		prompt   bool
	}{
		{name: "yes on a terminal", terminal: true, answer: "y\n", ok: true, prompt: true},
		{name: "YES on a terminal", terminal: true, answer: "YES\n", ok: true, prompt: true},
		{name: "no on a terminal", terminal: true, answer: "n\n", prompt: true},
		{name: "nothing on a terminal", terminal: true, answer: "", prompt: true},
		{name: "no terminal", terminal: false, ok: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := stdinIsTerminal
			stdinIsTerminal = func(io.Reader) bool { return tt.terminal }
			t.Cleanup(func() { stdinIsTerminal = before })
			cmd := &cobra.Command{}
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetIn(strings.NewReader(tt.answer))
			cmd.SetContext(context.Background())
			digest, ok, err := confirm(cmd, c, "to-prod", "Approve")
			if err != nil {
				t.Fatal(err)
			}
			if ok != tt.ok || (ok && digest != "sha256:aaaa") {
				t.Errorf("confirm = %q, %v; want ok %v with the digest shown", digest, ok, tt.ok)
			}
			text := out.String()
			if !strings.Contains(text, "~ size: 1 => 2 (forces replacement)") {
				t.Errorf("the review was not shown:\n%s", text)
			}
			if got := strings.Contains(text, "Approve promotion to-prod (plan sha256:aaaa)? [y/N]"); got != tt.prompt {
				t.Errorf("prompt shown %v, want %v:\n%s", got, tt.prompt, text)
			}
		})
	}
}

// TestDecideRefusesAnotherPlan: a decision held to the digest that was
// reviewed is refused once the promotion's plan has changed.
func TestDecideRefusesAnotherPlan(t *testing.T) {
	c := reviewClient(t)
	_, err := c.Decide(context.Background(), pipelinectl.Decision{Promotion: "to-prod", PlanDigest: "sha256:bbbb"})
	if err == nil || !strings.Contains(err.Error(), "its plan changed since you reviewed it") {
		t.Errorf("Decide = %v, want a refusal naming the changed plan", err)
	}
}
