package editstamp

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/change"
)

func stack(governed bool, replicas, commit string) *pulumiv1.Stack {
	s := &pulumiv1.Stack{
		TypeMeta:   metav1.TypeMeta{APIVersion: pulumiv1.GroupVersion.String(), Kind: "Stack"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod", Annotations: map[string]string{"team": "web"}},
		Spec: shared.StackSpec{Stack: "prod", GitSource: &shared.GitSource{ProjectRepo: "https://git.example/web.git", Commit: commit},
			Config: map[string]apiextensionsv1.JSON{"web:replicas": {Raw: []byte(strconv.Quote(replicas))}}},
	}
	if governed {
		s.Annotations[promotionv1alpha1.AuthorizedStageAnnotation] = "prod"
	}
	return s
}

func raw(t *testing.T, s *pulumiv1.Stack) runtime.RawExtension {
	t.Helper()
	if s == nil {
		return runtime.RawExtension{}
	}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: data}
}

func TestHandle(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := pulumiv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	h := &Handler{Decoder: admission.NewDecoder(scheme)}
	const a, b = "0123456789abcdef0123456789abcdef01234567", "fedcba9876543210fedcba9876543210fedcba98"
	bare := stack(true, "3", a)
	bare.Annotations = map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: "prod"}
	for _, tt := range []struct {
		name      string
		op        admissionv1.Operation
		user      string
		old, next *pulumiv1.Stack
		// stamped is the Stack the patch must make (nil: no patch).
		stamped *pulumiv1.Stack
		code    int32 // of a refusal; 0 when allowed
	}{
		{"a governed Stack made", admissionv1.Create, "alice", nil, stack(true, "3", a), stack(true, "3", a), 0},
		{"its config changed", admissionv1.Update, "alice", stack(true, "3", a), stack(true, "4", a), stack(true, "4", a), 0},
		{"only its commit changed", admissionv1.Update, "operator", stack(true, "3", a), stack(true, "3", b), nil, 0},
		{"its labels changed", admissionv1.Update, "alice", stack(true, "3", a), stack(true, "3", a), nil, 0},
		{"an ungoverned Stack changed", admissionv1.Update, "alice", stack(false, "3", a), stack(false, "4", a), nil, 0},
		{"bound to a stage", admissionv1.Update, "alice", stack(false, "3", a), stack(true, "3", a), nil, 0},
		{"deleted", admissionv1.Delete, "alice", stack(true, "3", a), nil, nil, 0},
		{"no username", admissionv1.Update, "", stack(true, "3", a), stack(true, "4", a), nil, http.StatusForbidden},
		{"only the stage's annotation", admissionv1.Create, "alice", nil, bare, bare, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: tt.op, UserInfo: authenticationv1.UserInfo{Username: tt.user},
				Object: raw(t, tt.next), OldObject: raw(t, tt.old),
			}}
			resp := h.Handle(context.Background(), req)
			if tt.code != 0 {
				if resp.Allowed || resp.Result == nil || resp.Result.Code != tt.code {
					t.Fatalf("response %+v; want a refusal with code %d", resp.Result, tt.code)
				}
				return
			}
			if !resp.Allowed {
				t.Fatalf("refused: %+v", resp.Result)
			}
			if tt.stamped == nil {
				if len(resp.Patches) != 0 {
					t.Fatalf("patched %+v; want nothing", resp.Patches)
				}
				return
			}
			want := tt.stamped.DeepCopy()
			if err := change.StampEdit(want, tt.user); err != nil {
				t.Fatal(err)
			}
			got := apply(t, tt.next, resp.Patches)
			for _, k := range []string{promotionv1alpha1.EditedByAnnotation, promotionv1alpha1.EditedSpecAnnotation} {
				if got[k] != want.Annotations[k] {
					t.Errorf("annotation %s = %q, want %q", k, got[k], want.Annotations[k])
				}
			}
			if len(got) != len(want.Annotations) {
				t.Errorf("annotations = %v, want %v", got, want.Annotations)
			}
		})
	}
}

// apply applies the operations the handler makes, each an "add" of one
// annotation, to s's annotations, and returns them.
func apply(t *testing.T, s *pulumiv1.Stack, ops []jsonpatch.JsonPatchOperation) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range s.Annotations {
		out[k] = v
	}
	for _, op := range ops {
		if op.Operation != "add" {
			t.Fatalf("operation %q; want add", op.Operation)
		}
		key, ok := strings.CutPrefix(op.Path, "/metadata/annotations/")
		if !ok {
			t.Fatalf("path %q is not an annotation's", op.Path)
		}
		out[strings.NewReplacer("~1", "/", "~0", "~").Replace(key)] = op.Value.(string)
	}
	return out
}
