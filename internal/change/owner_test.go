package change

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

func consents(stage string) map[string]string {
	if stage == "" {
		return nil
	}
	return map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: stage}
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
		st := promotionv1alpha1.Stage{ObjectMeta: metav1.ObjectMeta{Name: name}}
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
