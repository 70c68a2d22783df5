package change

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

func stage(name string, stacks ...string) promotionv1alpha1.Stage {
	st := promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, s := range stacks {
		st.Spec.Stacks = append(st.Spec.Stacks, promotionv1alpha1.StackBinding{Name: s})
	}
	return st
}

func consents(stage string) map[string]string {
	if stage == "" {
		return nil
	}
	return map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: stage}
}

// TestOwnerOf: a stage owns a Stack only when both say so; age no longer
// decides, and a preview-only or deleted stage owns nothing.
func TestOwnerOf(t *testing.T) {
	deleting := stage("gone", "web")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	preview := stage("preview", "web", "api", "db")
	preview.Spec.PreviewOnly = true
	stages := []promotionv1alpha1.Stage{stage("dev", "web", "api"), stage("prod", "web", "db"), deleting, preview}
	tests := []struct {
		stack, consent, want string
	}{
		{"web", "prod", "prod"}, // listed by dev too: the Stack's consent decides
		{"web", "dev", "dev"},   // the same Stack, consenting to the other stage
		{"api", "", ""},         // listed, no consent: nobody deploys it
		{"api", "prod", ""},     // consents to a stage that does not list it
		{"web", "gone", ""},     // a stage being deleted deploys nothing
		{"db", "preview", ""},   // a preview-only stage never changes a Stack
		{"cache", "dev", ""},    // not listed anywhere
	}
	for _, tt := range tests {
		got := ""
		if o := OwnerOf(stages, tt.stack, consents(tt.consent)); o != nil {
			got = o.Name
		}
		if got != tt.want {
			t.Errorf("OwnerOf(%s consenting to %q) = %q, want %q", tt.stack, tt.consent, got, tt.want)
		}
	}
}

func TestUnauthorized(t *testing.T) {
	if msg := Unauthorized("prod", "web", consents("prod")); msg != "" {
		t.Errorf("a consenting Stack: %q, want none", msg)
	}
	if msg := Unauthorized("prod", "web", nil); !strings.Contains(msg, promotionv1alpha1.AuthorizedStageAnnotation+"=prod") {
		t.Errorf("no consent: %q, want the annotation to set", msg)
	}
	if msg := Unauthorized("dev", "web", consents("prod")); !strings.Contains(msg, `only by Stage "prod"`) {
		t.Errorf("consent to another stage: %q, want it named", msg)
	}
}

func TestCompareAge(t *testing.T) {
	at := func(name string, d time.Duration) *promotionv1alpha1.Stage {
		st := stage(name)
		st.CreationTimestamp = metav1.NewTime(time.Unix(0, 0).Add(d))
		return &st
	}
	if CompareAge(at("b", 0), at("a", time.Second)) >= 0 {
		t.Error("the older object must come first")
	}
	if CompareAge(at("a", 0), at("b", 0)) >= 0 {
		t.Error("of two objects of the same age, the name must decide")
	}
}
