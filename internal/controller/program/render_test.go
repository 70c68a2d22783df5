package program

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// j wraps raw JSON as a spec value.
func j(raw string) apiextensionsv1.JSON { return apiextensionsv1.JSON{Raw: []byte(raw)} }

// jp is j as a pointer.
func jp(raw string) *apiextensionsv1.JSON { v := j(raw); return &v }

func TestRenderGolden(t *testing.T) {
	spec := &pulumiv1.ProgramSpec{
		Configuration: map[string]pulumiv1.Configuration{
			"replicas": {Type: "Number", Default: jp(`3`)},
			"region":   {Type: "String"},
		},
		Variables: map[string]apiextensionsv1.JSON{
			"big":   j(`1000000`),
			"ratio": j(`1.5`),
			"image": j(`{"fn::invoke":{"function":"docker:getImage","arguments":{"name":"nginx"}}}`),
		},
		Resources: map[string]pulumiv1.Resource{
			"bucket": {Type: "aws:s3:BucketV2"},
			"object": {
				Type:       "aws:s3:BucketObject",
				Properties: map[string]apiextensionsv1.JSON{"bucket": j(`"${bucket}"`), "source": j(`{"fn::stringAsset":"<h1>hi</h1>"}`), "count": j(`"42"`)},
				Options:    &pulumiv1.Options{DependsOn: []apiextensionsv1.JSON{j(`"${bucket}"`)}, Protect: true},
			},
		},
		Outputs:  map[string]apiextensionsv1.JSON{"url": j(`"http://${bucket.websiteEndpoint}"`)},
		Packages: map[string]string{"mypkg": "github.com/org/repo@v1.2.3"},
	}
	files, err := Render("web", spec)
	if err != nil {
		t.Fatal(err)
	}
	want := `name: web
runtime: yaml
packages:
  mypkg: github.com/org/repo@v1.2.3
configuration:
  region:
    type: String
  replicas:
    default: 3
    type: Number
variables:
  big: 1000000
  image:
    fn::invoke:
      arguments:
        name: nginx
      function: docker:getImage
  ratio: 1.5
resources:
  bucket:
    type: aws:s3:BucketV2
  object:
    options:
      dependsOn:
        - ${bucket}
      protect: true
    properties:
      bucket: ${bucket}
      count: "42"
      source:
        fn::stringAsset: <h1>hi</h1>
    type: aws:s3:BucketObject
outputs:
  url: http://${bucket.websiteEndpoint}
`
	if got := string(files[ProjectFile]); got != want {
		t.Errorf("Pulumi.yaml:\n%s\nwant:\n%s", got, want)
	}
	if len(files) != 1 {
		t.Errorf("files = %v, want only %s", len(files), ProjectFile)
	}
	for range 10 {
		again, _ := Render("web", spec)
		if string(again[ProjectFile]) != string(files[ProjectFile]) {
			t.Fatal("two renders of the same program differ")
		}
	}
}

func TestRenderEmptyProgram(t *testing.T) {
	files, err := Render("empty", &pulumiv1.ProgramSpec{})
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := yaml.Unmarshal(files[ProjectFile], &p); err != nil {
		t.Fatal(err)
	}
	if len(p) != 2 || p["name"] != "empty" || p["runtime"] != "yaml" {
		t.Errorf("project = %v, want only name and runtime", p)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		spec pulumiv1.ProgramSpec
		want []string // substrings of the error; none means valid
	}{
		{name: "empty"},
		{name: "typed configuration", spec: pulumiv1.ProgramSpec{Configuration: map[string]pulumiv1.Configuration{
			"a": {Type: "String", Default: jp(`"x"`)},
			"b": {Type: "Number", Default: jp(`2.5`)},
			"c": {Type: "List<String>", Default: jp(`["x","y"]`)},
			"d": {Type: "List<Number>", Default: jp(`[1,2]`)},
			"e": {Default: jp(`true`)},
			"f": {Type: "List<Number>", Default: jp(`[]`)},
		}}},
		{name: "neither type nor default", spec: pulumiv1.ProgramSpec{Configuration: map[string]pulumiv1.Configuration{"a": {}}},
			want: []string{"program.configuration.a: give a type or a default"}},
		{name: "string default for a number", spec: pulumiv1.ProgramSpec{Configuration: map[string]pulumiv1.Configuration{"n": {Type: "Number", Default: jp(`"three"`)}}},
			want: []string{`program.configuration.n.default: "three" does not fit the type Number`}},
		{name: "number default for a string", spec: pulumiv1.ProgramSpec{Configuration: map[string]pulumiv1.Configuration{"s": {Type: "String", Default: jp(`3`)}}},
			want: []string{"program.configuration.s.default"}},
		{name: "mixed list", spec: pulumiv1.ProgramSpec{Configuration: map[string]pulumiv1.Configuration{"l": {Type: "List<String>", Default: jp(`["a",1]`)}}},
			want: []string{"program.configuration.l.default"}},
		{name: "scalar for a list", spec: pulumiv1.ProgramSpec{Configuration: map[string]pulumiv1.Configuration{"l": {Type: "List<Number>", Default: jp(`1`)}}},
			want: []string{"program.configuration.l.default"}},
		{name: "resource without type", spec: pulumiv1.ProgramSpec{Resources: map[string]pulumiv1.Resource{"r": {}}},
			want: []string{"program.resources.r.type: required"}},
		{name: "get with properties", spec: pulumiv1.ProgramSpec{Resources: map[string]pulumiv1.Resource{"r": {
			Type: "aws:s3:BucketV2", Get: &pulumiv1.Getter{ID: "b"}, Properties: map[string]apiextensionsv1.JSON{"x": j(`1`)},
		}}}, want: []string{"program.resources.r.get: cannot be combined with properties"}},
		{name: "get alone", spec: pulumiv1.ProgramSpec{Resources: map[string]pulumiv1.Resource{"r": {Type: "aws:s3:BucketV2", Get: &pulumiv1.Getter{ID: "b"}}}}},
		{name: "variable shadows configuration", spec: pulumiv1.ProgramSpec{
			Configuration: map[string]pulumiv1.Configuration{"x": {Type: "String"}},
			Variables:     map[string]apiextensionsv1.JSON{"x": j(`1`)},
		}, want: []string{"program.variables.x: the name is already used by program.configuration.x"}},
		{name: "resource shadows variable", spec: pulumiv1.ProgramSpec{
			Variables: map[string]apiextensionsv1.JSON{"b": j(`1`)},
			Resources: map[string]pulumiv1.Resource{"b": {Type: "aws:s3:BucketV2"}},
		}, want: []string{"program.resources.b: the name is already used by program.variables.b"}},
		{name: "outputs may reuse names", spec: pulumiv1.ProgramSpec{
			Resources: map[string]pulumiv1.Resource{"b": {Type: "aws:s3:BucketV2"}},
			Outputs:   map[string]apiextensionsv1.JSON{"b": j(`"${b.id}"`)},
		}},
		{name: "every problem is reported", spec: pulumiv1.ProgramSpec{
			Configuration: map[string]pulumiv1.Configuration{"a": {}},
			Resources:     map[string]pulumiv1.Resource{"r": {}},
		}, want: []string{"program.configuration.a", "program.resources.r.type"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(&tt.spec)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate = %v, want no error", err)
				}
				if _, err := Render("p", &tt.spec); err != nil {
					t.Fatalf("Render = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate = nil, want an error mentioning %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate = %q, want it to mention %q", err, w)
				}
			}
			if _, rerr := Render("p", &tt.spec); rerr == nil || rerr.Error() != err.Error() {
				t.Errorf("Render error = %v, want the validation error", rerr)
			}
		})
	}
}
