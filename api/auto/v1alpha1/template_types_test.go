package v1alpha1

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"
)

// A template must encode only what it sets: anything else (a null, an empty
// list) would erase the generated value when merged.
func TestTemplatesEncodeOnlyWhatIsSet(t *testing.T) {
	tests := []struct {
		name     string
		template any
		want     string
	}{
		{"empty workspace template", WorkspaceTemplate{}, `{}`},
		{"workspace image", WorkspaceTemplate{Spec: &WorkspaceSpecTemplate{Image: ptr.To("pulumi/pulumi:3.170.0")}},
			`{"spec":{"image":"pulumi/pulumi:3.170.0"}}`},
		{"workspace pod template", WorkspaceTemplate{Spec: &WorkspaceSpecTemplate{PodTemplate: &PodTemplateOverlay{
			Spec: &apiextensionsv1.JSON{Raw: []byte(`{"nodeSelector":{"disk":"ssd"}}`)},
		}}}, `{"spec":{"podTemplate":{"spec":{"nodeSelector":{"disk":"ssd"}}}}}`},
		{"empty update template", UpdateTemplate{}, `{}`},
		{"update retention", UpdateTemplate{Spec: &UpdateSpec{TtlAfterCompleted: &metav1.Duration{Duration: time.Hour}}},
			`{"spec":{"ttlAfterCompleted":"1h0m0s"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.template)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// A WorkspaceTemplate, encoded, is a strategic merge patch of a Workspace:
// lists merge by name, and the free-form pod spec merges like a typed one.
func TestWorkspaceTemplateMergesOverWorkspace(t *testing.T) {
	generated := Workspace{Spec: WorkspaceSpec{
		ServiceAccountName: "pulumi",
		Image:              "pulumi/pulumi:latest-nonroot",
		Env:                []corev1.EnvVar{{Name: "A", Value: "a"}},
		PodTemplate: &EmbeddedPodTemplateSpec{Spec: &corev1.PodSpec{
			Containers: []corev1.Container{{Name: "pulumi", Image: "pulumi/pulumi:latest-nonroot"}},
		}},
		Stacks: []WorkspaceStack{{Name: "dev", Config: []ConfigItem{
			{Key: "aws:region", Value: &apiextensionsv1.JSON{Raw: []byte(`"us-east-1"`)}},
		}}},
	}}
	template := WorkspaceTemplate{
		Metadata: &EmbeddedObjectMeta{Labels: map[string]string{"team": "infra"}},
		Spec: &WorkspaceSpecTemplate{
			Image: ptr.To("pulumi/pulumi:3.170.0-nonroot"),
			Env:   []corev1.EnvVar{{Name: "B", Value: "b"}},
			PodTemplate: &PodTemplateOverlay{Spec: &apiextensionsv1.JSON{Raw: []byte(
				`{"nodeSelector":{"disk":"ssd"},"containers":[{"name":"pulumi","resources":{"limits":{"memory":"2Gi"}}}]}`,
			)}},
			Stacks: []WorkspaceStack{{Name: "dev", Config: []ConfigItem{
				{Key: "app:size", Value: &apiextensionsv1.JSON{Raw: []byte(`3`)}},
			}}},
		},
	}
	original, err := json.Marshal(generated)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := json.Marshal(template)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := strategicpatch.StrategicMergePatch(original, patch, Workspace{})
	if err != nil {
		t.Fatal(err)
	}
	var got Workspace
	if err := json.Unmarshal(merged, &got); err != nil {
		t.Fatal(err)
	}

	want := generated.DeepCopy()
	want.Labels = map[string]string{"team": "infra"}
	want.Spec.Image = "pulumi/pulumi:3.170.0-nonroot"
	// A strategic merge puts list items that only the patch has first.
	want.Spec.Env = append([]corev1.EnvVar{{Name: "B", Value: "b"}}, want.Spec.Env...)
	want.Spec.PodTemplate.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	want.Spec.PodTemplate.Spec.Containers[0].Resources.Limits = corev1.ResourceList{
		corev1.ResourceMemory: resource.MustParse("2Gi"),
	}
	want.Spec.Stacks[0].Config = append([]ConfigItem{{Key: "app:size", Value: &apiextensionsv1.JSON{Raw: []byte(`3`)}}},
		want.Spec.Stacks[0].Config...)
	if !equality.Semantic.DeepEqual(*want, got) {
		w, _ := json.Marshal(want)
		t.Errorf("merged workspace:\n got %s\nwant %s", merged, w)
	}
}
