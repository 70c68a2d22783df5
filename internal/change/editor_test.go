package change

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

func TestEditorOf(t *testing.T) {
	base := func() *pulumiv1.Stack {
		return &pulumiv1.Stack{
			ObjectMeta: metav1.ObjectMeta{Name: "prod", Annotations: map[string]string{promotionv1alpha1.AuthorizedStageAnnotation: "prod"}},
			Spec:       shared.StackSpec{Stack: "prod", GitSource: &shared.GitSource{ProjectRepo: "https://git.example/web.git", Commit: "a"}},
		}
	}
	stamped := func() *pulumiv1.Stack {
		s := base()
		if err := StampEdit(s, "alice"); err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tt := range []struct {
		name   string
		stack  *pulumiv1.Stack
		editor string // "": none known
	}{
		{"never stamped", base(), ""},
		{"stamped", stamped(), "alice"},
		{"its commit pinned since", func() *pulumiv1.Stack { s := stamped(); s.Spec.GitSource.Commit = "b"; return s }(), "alice"},
		{"its spec changed since", func() *pulumiv1.Stack { s := stamped(); s.Spec.RepoDir = "infra"; return s }(), ""},
		{"a stamp without its digest", func() *pulumiv1.Stack {
			s := stamped()
			delete(s.Annotations, promotionv1alpha1.EditedSpecAnnotation)
			return s
		}(), ""},
		{"a digest of another spec", func() *pulumiv1.Stack {
			s := stamped()
			s.Annotations[promotionv1alpha1.EditedSpecAnnotation] = "sha256:0"
			return s
		}(), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ed, ok, err := EditorOf(tt.stack)
			if err != nil {
				t.Fatal(err)
			}
			if ok != (tt.editor != "") || ed.Username != tt.editor {
				t.Errorf("EditorOf = %+v, %v; want %q", ed, ok, tt.editor)
			}
		})
	}
	if err := StampEdit(base(), ""); err == nil {
		t.Error("StampEdit stamped a request without a username")
	}
}
