package update

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
)

func TestOutputKey(t *testing.T) {
	for name, want := range map[string]string{
		"plain":        "plain",
		"answer/key":   "answer_key",
		"a b:c":        "a_b_c",
		"dots.and-ok_": "dots.and-ok_",
		"ünïcode":      "_n_code",
	} {
		if got := OutputKey(name); got != want {
			t.Errorf("OutputKey(%q) = %q, want %q", name, got, want)
		}
		if errs := validation.IsConfigMapKey(OutputKey(name)); len(errs) > 0 {
			t.Errorf("OutputKey(%q) is not a valid Secret key: %v", name, errs)
		}
	}
}

func TestOutputsSecretName(t *testing.T) {
	if got := OutputsSecretName("stack-1a2b"); got != "stack-1a2b-stack-outputs" {
		t.Errorf("OutputsSecretName = %q", got)
	}
	long := strings.Repeat("a", 250)
	got := OutputsSecretName(long)
	if len(got) > 253 || !strings.HasSuffix(got, "-stack-outputs") || got == OutputsSecretName(long+"b") {
		t.Errorf("OutputsSecretName of a long name = %q (%d characters)", got, len(got))
	}
	if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
		t.Errorf("%q is not an object name: %v", got, errs)
	}
}

// TestOutputsSecret checks the Secret built from outputs: immutable,
// controlled by the Update, JSON values, the secret keys in the
// annotation, sorted, and the change summary under its key.
func TestOutputsSecret(t *testing.T) {
	r := &Reconciler{Scheme: env.Scheme}
	obj := &autov1alpha1.Update{ObjectMeta: metav1.ObjectMeta{Name: "u", Namespace: "ns", UID: "uid-1"}}
	value := func(v any) *structpb.Value {
		pv, err := structpb.NewValue(v)
		if err != nil {
			t.Fatal(err)
		}
		return pv
	}
	o := &outcome{outputs: map[string]*agentpb.OutputValue{
		"zeta":    {Value: value("s3cr3t-value"), Secret: true},
		"alpha":   {Value: value(map[string]any{"n": 1.0, "l": []any{"x"}})},
		"beta/pw": {Value: value("other-secret"), Secret: true},
		"nothing": {Secret: true},
	}}
	s, err := r.outputsSecret(obj, o)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "u-stack-outputs" || s.Namespace != "ns" || s.Immutable == nil || !*s.Immutable {
		t.Errorf("secret %s/%s immutable=%v", s.Namespace, s.Name, s.Immutable)
	}
	if !metav1.IsControlledBy(s, obj) {
		t.Errorf("owner references %+v", s.OwnerReferences)
	}
	if got := s.Annotations[autov1alpha1.SecretOutputsAnnotation]; got != `["beta_pw","nothing","zeta"]` {
		t.Errorf("annotation = %s", got)
	}
	for key, want := range map[string]string{
		"zeta": `"s3cr3t-value"`, "alpha": `{"l":["x"],"n":1}`, "beta_pw": `"other-secret"`, "nothing": "null",
	} {
		if got := string(s.Data[key]); got != want {
			t.Errorf("data[%s] = %s, want %s", key, got, want)
		}
	}

	if s, _ := r.outputsSecret(obj, &outcome{}); s != nil {
		t.Error("a Secret for an outcome without outputs")
	}
}

// TestSecretOutputs removes secret output values, whole and by their string
// leaves, and leaves plain outputs and short scalars alone.
func TestSecretOutputs(t *testing.T) {
	value := func(v any) *structpb.Value {
		pv, _ := structpb.NewValue(v)
		return pv
	}
	s := secretOutputs(map[string]*agentpb.OutputValue{
		"pw":     {Value: value("hunter2-long"), Secret: true},
		"nested": {Value: value(map[string]any{"token": "tok-123456", "port": 5432.0}), Secret: true},
		"flag":   {Value: value(true), Secret: true},
		"plain":  {Value: value("visible-value")},
		"empty":  {Value: value(""), Secret: true},
	})
	in := "pw=hunter2-long token=tok-123456 port 5432 flag true plain=visible-value"
	want := "pw=[secret] token=[secret] port 5432 flag true plain=visible-value"
	if got := s.Redact(in); got != want {
		t.Errorf("Redact = %q, want %q", got, want)
	}
	if got := secretOutputs(nil).Redact(in); got != in {
		t.Errorf("no secret outputs, yet the text changed the text: %q", got)
	}
}
