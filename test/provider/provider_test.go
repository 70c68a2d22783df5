package provider

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// props builds a PropertyMap from plain Go values, as a program would send.
func props(m map[string]any) resource.PropertyMap {
	return resource.NewPropertyMapFromMap(m)
}

var unknownString = resource.MakeComputed(resource.NewStringProperty(""))

func TestCheckInputs(t *testing.T) {
	tests := []struct {
		name         string
		token        string
		news         resource.PropertyMap
		wantFailures []string
		wantInputs   resource.PropertyMap // checked only when not nil
	}{
		{name: "file ok", token: FileType,
			news: props(map[string]any{"path": "/tmp/x", "content": "hi"})},
		{name: "file relative path", token: FileType,
			news:         props(map[string]any{"path": "x.txt", "content": "hi"}),
			wantFailures: []string{`path: must be an absolute path, got "x.txt"`}},
		{name: "file missing content", token: FileType,
			news:         props(map[string]any{"path": "/tmp/x"}),
			wantFailures: []string{"content: required property is missing"}},
		{name: "file content of wrong type", token: FileType,
			news:         props(map[string]any{"path": "/tmp/x", "content": 3}),
			wantFailures: []string{"content: must be a string"}},
		{name: "file unknown content is accepted in a preview", token: FileType,
			news: resource.PropertyMap{"path": resource.NewStringProperty("/tmp/x"), "content": unknownString}},
		{name: "file secret content is checked inside the secret", token: FileType,
			news: resource.PropertyMap{
				"path":    resource.NewStringProperty("/tmp/x"),
				"content": resource.MakeSecret(resource.NewNumberProperty(1)),
			},
			wantFailures: []string{"content: must be a string"}},
		{name: "file unknown property", token: FileType,
			news:         props(map[string]any{"path": "/tmp/x", "content": "a", "mode": "0600"}),
			wantFailures: []string{"mode: unknown property; stackyardtest:index:File takes path, content"}},
		{name: "random ok with keepers", token: RandomType,
			news: props(map[string]any{"length": 8, "keepers": map[string]any{"a": "b"}})},
		{name: "random zero length", token: RandomType,
			news:         props(map[string]any{"length": 0}),
			wantFailures: []string{"length: must be a positive integer"}},
		{name: "random negative length", token: RandomType,
			news:         props(map[string]any{"length": -3}),
			wantFailures: []string{"length: must be a positive integer"}},
		{name: "random fractional length", token: RandomType,
			news:         props(map[string]any{"length": 2.5}),
			wantFailures: []string{"length: must be a positive integer"}},
		{name: "random huge length", token: RandomType,
			news:         props(map[string]any{"length": 5000}),
			wantFailures: []string{"length: must be at most 4096, got 5000"}},
		{name: "random keepers not a map", token: RandomType,
			news:         props(map[string]any{"length": 1, "keepers": "x"}),
			wantFailures: []string{"keepers: must be a map"}},
		{name: "random several problems, all reported", token: RandomType,
			news:         props(map[string]any{"keepers": []any{1}}),
			wantFailures: []string{"length: required property is missing", "keepers: must be a map"}},
		{name: "sleep ok", token: SleepType,
			news: props(map[string]any{"seconds": 0.5})},
		{name: "sleep negative", token: SleepType,
			news:         props(map[string]any{"seconds": -1}),
			wantFailures: []string{"seconds: must be a number of seconds from 0 to 3600, got -1"}},
		{name: "sleep string", token: SleepType,
			news:         props(map[string]any{"seconds": "5"}),
			wantFailures: []string{"seconds: must be a number"}},
		{name: "fail defaults fail to false", token: FailType,
			news:       props(map[string]any{"message": "m"}),
			wantInputs: props(map[string]any{"message": "m", "fail": false})},
		{name: "fail with a non-boolean fail", token: FailType,
			news:         props(map[string]any{"message": "m", "fail": "yes"}),
			wantFailures: []string{"fail: must be a boolean"}},
		{name: "unknown type", token: "stackyardtest:index:Nope",
			news:         props(map[string]any{}),
			wantFailures: []string{`unknown resource type "stackyardtest:index:Nope"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inputs, failures := checkInputs(tt.token, tt.news)
			var got []string
			for _, f := range failures {
				got = append(got, f.String())
				if f.Property != "" && !strings.HasPrefix(f.String(), f.Property+": ") {
					t.Errorf("failure %q does not name its property %q first", f.String(), f.Property)
				}
			}
			if !reflect.DeepEqual(got, tt.wantFailures) {
				t.Errorf("failures = %q, want %q", got, tt.wantFailures)
			}
			if tt.wantInputs != nil && !inputs.DeepEquals(tt.wantInputs) {
				t.Errorf("inputs = %v, want %v", inputs, tt.wantInputs)
			}
		})
	}
}

func TestDiffInputs(t *testing.T) {
	const (
		update  = pulumirpc.PropertyDiff_UPDATE
		replace = pulumirpc.PropertyDiff_UPDATE_REPLACE
		addRepl = pulumirpc.PropertyDiff_ADD_REPLACE
		delRepl = pulumirpc.PropertyDiff_DELETE_REPLACE
	)
	fileState := props(map[string]any{"path": "/tmp/a", "content": "one", "sha256": sha256Hex("one")})
	randomState := props(map[string]any{"length": 8, "keepers": map[string]any{"k": "1"}, "result": "abcdefgh"})
	tests := []struct {
		name        string
		token       string
		olds, news  resource.PropertyMap
		want        map[string]pulumirpc.PropertyDiff_Kind
		wantReplace []string
	}{
		{name: "file unchanged", token: FileType, olds: fileState,
			news: props(map[string]any{"path": "/tmp/a", "content": "one"})},
		{name: "file content changes in place", token: FileType, olds: fileState,
			news: props(map[string]any{"path": "/tmp/a", "content": "two"}),
			want: map[string]pulumirpc.PropertyDiff_Kind{"content": update}},
		{name: "file path change replaces", token: FileType, olds: fileState,
			news:        props(map[string]any{"path": "/tmp/b", "content": "one"}),
			want:        map[string]pulumirpc.PropertyDiff_Kind{"path": replace},
			wantReplace: []string{"path"}},
		{name: "file unknown content counts as a change", token: FileType, olds: fileState,
			news: resource.PropertyMap{"path": resource.NewStringProperty("/tmp/a"), "content": unknownString},
			want: map[string]pulumirpc.PropertyDiff_Kind{"content": update}},
		{name: "file content made secret is no change", token: FileType, olds: fileState,
			news: resource.PropertyMap{
				"path":    resource.NewStringProperty("/tmp/a"),
				"content": resource.MakeSecret(resource.NewStringProperty("one")),
			}},
		{name: "random unchanged", token: RandomType, olds: randomState,
			news: props(map[string]any{"length": 8, "keepers": map[string]any{"k": "1"}})},
		{name: "random length replaces", token: RandomType, olds: randomState,
			news:        props(map[string]any{"length": 9, "keepers": map[string]any{"k": "1"}}),
			want:        map[string]pulumirpc.PropertyDiff_Kind{"length": replace},
			wantReplace: []string{"length"}},
		{name: "random keeper value replaces", token: RandomType, olds: randomState,
			news:        props(map[string]any{"length": 8, "keepers": map[string]any{"k": "2"}}),
			want:        map[string]pulumirpc.PropertyDiff_Kind{"keepers": replace},
			wantReplace: []string{"keepers"}},
		{name: "random keepers removed replaces", token: RandomType, olds: randomState,
			news:        props(map[string]any{"length": 8}),
			want:        map[string]pulumirpc.PropertyDiff_Kind{"keepers": delRepl},
			wantReplace: []string{"keepers"}},
		{name: "random keepers added replaces", token: RandomType,
			olds:        props(map[string]any{"length": 8, "result": "abcdefgh"}),
			news:        props(map[string]any{"length": 8, "keepers": map[string]any{"k": "1"}}),
			want:        map[string]pulumirpc.PropertyDiff_Kind{"keepers": addRepl},
			wantReplace: []string{"keepers"}},
		{name: "sleep seconds update in place", token: SleepType,
			olds: props(map[string]any{"seconds": 1}), news: props(map[string]any{"seconds": 2}),
			want: map[string]pulumirpc.PropertyDiff_Kind{"seconds": update}},
		{name: "fail toggled updates in place", token: FailType,
			olds: props(map[string]any{"message": "m", "fail": false}),
			news: props(map[string]any{"message": "m", "fail": true}),
			want: map[string]pulumirpc.PropertyDiff_Kind{"fail": update}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changes, err := diffInputs(tt.token, tt.olds, tt.news)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]pulumirpc.PropertyDiff_Kind{}
			for _, c := range changes {
				got[c.name] = c.kind
			}
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("changes = %v, want %v", got, tt.want)
			}
			resp := diffResponse(changes)
			if !reflect.DeepEqual(resp.Replaces, tt.wantReplace) {
				t.Errorf("replaces = %v, want %v", resp.Replaces, tt.wantReplace)
			}
			wantChanges := pulumirpc.DiffResponse_DIFF_NONE
			if len(tt.want) > 0 {
				wantChanges = pulumirpc.DiffResponse_DIFF_SOME
			}
			if resp.Changes != wantChanges {
				t.Errorf("changes kind = %v, want %v", resp.Changes, wantChanges)
			}
		})
	}
	if _, err := diffInputs("stackyardtest:index:Nope", nil, nil); err == nil {
		t.Error("diff of an unknown type succeeded")
	}
}

// TestSchemaMatchesInputSpecs keeps schema.json (what YAML type-checks
// against) and the specs Check enforces from drifting apart.
func TestSchemaMatchesInputSpecs(t *testing.T) {
	var schema struct {
		Name      string
		Version   string
		Resources map[string]struct {
			InputProperties map[string]struct {
				Type             string
				ReplaceOnChanges bool
			}
			RequiredInputs []string
			Properties     map[string]struct{ Secret bool }
		}
	}
	if err := json.Unmarshal([]byte(Schema()), &schema); err != nil {
		t.Fatalf("schema.json does not parse: %v", err)
	}
	if schema.Name != Name || schema.Version != Version {
		t.Errorf("schema is %s@%s, want %s@%s", schema.Name, schema.Version, Name, Version)
	}
	kindNames := map[valueKind]string{
		kindString: "string", kindInteger: "integer", kindNumber: "number", kindBool: "boolean", kindMap: "object",
	}
	if len(schema.Resources) != len(inputSpecs) {
		t.Errorf("schema has %d resources, specs have %d", len(schema.Resources), len(inputSpecs))
	}
	for token, specs := range inputSpecs {
		res, ok := schema.Resources[token]
		if !ok {
			t.Errorf("schema lacks %s", token)
			continue
		}
		var required []string
		for _, spec := range specs {
			p, ok := res.InputProperties[spec.name]
			if !ok {
				t.Errorf("%s: schema lacks input %s", token, spec.name)
				continue
			}
			if p.Type != kindNames[spec.kind] {
				t.Errorf("%s.%s: schema type %q, spec type %q", token, spec.name, p.Type, kindNames[spec.kind])
			}
			if p.ReplaceOnChanges != spec.replaces {
				t.Errorf("%s.%s: schema replaceOnChanges %v, spec %v", token, spec.name, p.ReplaceOnChanges, spec.replaces)
			}
			if _, ok := res.Properties[spec.name]; !ok {
				t.Errorf("%s: input %s is not also an output", token, spec.name)
			}
			if spec.required {
				required = append(required, spec.name)
			}
		}
		if len(res.InputProperties) != len(specs) {
			t.Errorf("%s: schema has %d inputs, spec %d", token, len(res.InputProperties), len(specs))
		}
		sort.Strings(required)
		sort.Strings(res.RequiredInputs)
		if !reflect.DeepEqual(required, res.RequiredInputs) {
			t.Errorf("%s: schema requires %v, spec %v", token, res.RequiredInputs, required)
		}
	}
	if !schema.Resources[RandomType].Properties["secretResult"].Secret {
		t.Error("Random.secretResult is not marked secret in the schema")
	}
}

// structOf encodes a PropertyMap the way the engine sends it.
func structOf(t *testing.T, m resource.PropertyMap) *structpb.Struct {
	t.Helper()
	s, err := plugin.MarshalProperties(m, plugin.MarshalOptions{KeepUnknowns: true, KeepSecrets: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mapOf decodes a struct the way the engine reads it.
func mapOf(t *testing.T, s *structpb.Struct) resource.PropertyMap {
	t.Helper()
	m, err := plugin.UnmarshalProperties(s, plugin.MarshalOptions{KeepUnknowns: true, KeepSecrets: true})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

const testURN = "urn:pulumi:dev::proj::"

// TestFileLifecycle drives File through the gRPC methods, in process.
func TestFileLifecycle(t *testing.T) {
	ctx := context.Background()
	p := New()
	urn := testURN + FileType + "::f"
	path := filepath.Join(t.TempDir(), "sub", "f.txt")
	in := structOf(t, props(map[string]any{"path": path, "content": "hello"}))

	preview, err := p.Create(ctx, &pulumirpc.CreateRequest{Urn: urn, Properties: in, Preview: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a preview wrote the file (stat: %v)", err)
	}
	if got := mapOf(t, preview.Properties)["sha256"]; got.StringValue() != sha256Hex("hello") {
		t.Errorf("preview sha256 = %v", got)
	}

	created, err := p.Create(ctx, &pulumirpc.CreateRequest{Urn: urn, Properties: in})
	if err != nil {
		t.Fatal(err)
	}
	if created.Id != path {
		t.Errorf("id = %q, want the path %q", created.Id, path)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != "hello" {
		t.Fatalf("file = %q, %v", data, err)
	}

	if err := os.WriteFile(path, []byte("edited"), 0o644); err != nil {
		t.Fatal(err)
	}
	read, err := p.Read(ctx, &pulumirpc.ReadRequest{Id: path, Urn: urn, Properties: created.Properties, Inputs: in})
	if err != nil {
		t.Fatal(err)
	}
	state := mapOf(t, read.Properties)
	if state["content"].StringValue() != "edited" || state["sha256"].StringValue() != sha256Hex("edited") {
		t.Errorf("read state = %v", state)
	}
	if got := mapOf(t, read.Inputs)["content"].StringValue(); got != "edited" {
		t.Errorf("read inputs content = %q", got)
	}
	diff, err := p.Diff(ctx, &pulumirpc.DiffRequest{Id: path, Urn: urn, Olds: read.Properties, News: in})
	if err != nil {
		t.Fatal(err)
	}
	if diff.Changes != pulumirpc.DiffResponse_DIFF_SOME || !reflect.DeepEqual(diff.Diffs, []string{"content"}) {
		t.Errorf("diff after drift = %v", diff)
	}

	if _, err := p.Update(ctx, &pulumirpc.UpdateRequest{Id: path, Urn: urn, Olds: read.Properties, News: in}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); string(data) != "hello" {
		t.Errorf("after update file = %q", data)
	}

	if _, err := p.Delete(ctx, &pulumirpc.DeleteRequest{Id: path, Urn: urn, Properties: created.Properties}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("file still there after delete (stat: %v)", err)
	}
	gone, err := p.Read(ctx, &pulumirpc.ReadRequest{Id: path, Urn: urn, Properties: created.Properties})
	if err != nil {
		t.Fatal(err)
	}
	if gone.Id != "" {
		t.Errorf("read of a removed file returned id %q, want empty", gone.Id)
	}
	if _, err := p.Delete(ctx, &pulumirpc.DeleteRequest{Id: path, Urn: urn}); err != nil {
		t.Errorf("deleting an already removed file: %v", err)
	}
}

func TestRandomCreate(t *testing.T) {
	p := New()
	urn := testURN + RandomType + "::r"
	resp, err := p.Create(context.Background(), &pulumirpc.CreateRequest{
		Urn: urn, Properties: structOf(t, props(map[string]any{"length": 24})),
	})
	if err != nil {
		t.Fatal(err)
	}
	out := mapOf(t, resp.Properties)
	result := out["result"].StringValue()
	if len(result) != 24 || strings.Trim(result, randomAlphabet) != "" {
		t.Errorf("result = %q", result)
	}
	secret := out["secretResult"]
	if !secret.IsSecret() {
		t.Fatalf("secretResult = %v, not a secret", secret)
	}
	if s := secret.SecretValue().Element.StringValue(); len(s) != 24 || s == result {
		t.Errorf("secretResult = %q (result %q)", s, result)
	}
	// On the wire a secret is an object with Pulumi's secret signature.
	if sig := resp.Properties.Fields["secretResult"].GetStructValue().GetFields()[resource.SigKey]; sig.GetStringValue() != resource.SecretSig {
		t.Errorf("secretResult on the wire = %v", resp.Properties.Fields["secretResult"])
	}
}

func TestSleepHonoursDurationAndCancel(t *testing.T) {
	urn := testURN + SleepType + "::s"
	in := func(s float64) *structpb.Struct { return structOf(t, props(map[string]any{"seconds": s})) }

	p := New()
	start := time.Now()
	if _, err := p.Create(context.Background(), &pulumirpc.CreateRequest{Urn: urn, Properties: in(0.3)}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("slept %v, want at least 300ms", d)
	}

	// Cancel (the engine's interrupt) ends a running sleep with an error,
	// before its end: a sleep that ran to its end would return no error.
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, _ = p.Cancel(context.Background(), &emptypb.Empty{})
	}()
	_, err := p.Create(context.Background(), &pulumirpc.CreateRequest{Urn: urn, Properties: in(30)})
	if err == nil || !strings.Contains(err.Error(), "sleep of 30s cancelled after") {
		t.Errorf("cancelled sleep returned %v", err)
	}

	// So does the call's own context ending (the engine went away).
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := New().Update(ctx, &pulumirpc.UpdateRequest{Urn: urn, Olds: in(1), News: in(30)}); err == nil {
		t.Error("sleep outlived its context")
	}
}

func TestFailCreateAndUpdate(t *testing.T) {
	p := New()
	ctx := context.Background()
	urn := testURN + FailType + "::x"
	failing := structOf(t, props(map[string]any{"message": "boom: asked to fail", "fail": true}))
	passing := structOf(t, props(map[string]any{"message": "boom: asked to fail", "fail": false}))

	if _, err := p.Create(ctx, &pulumirpc.CreateRequest{Urn: urn, Properties: failing, Preview: true}); err != nil {
		t.Errorf("a preview failed: %v", err)
	}
	if _, err := p.Create(ctx, &pulumirpc.CreateRequest{Urn: urn, Properties: failing}); err == nil ||
		!strings.Contains(err.Error(), "boom: asked to fail") {
		t.Errorf("create returned %v", err)
	}
	if _, err := p.Create(ctx, &pulumirpc.CreateRequest{Urn: urn, Properties: passing}); err != nil {
		t.Errorf("create with fail=false: %v", err)
	}
	if _, err := p.Update(ctx, &pulumirpc.UpdateRequest{Urn: urn, Olds: passing, News: failing}); err == nil {
		t.Error("update with fail=true succeeded")
	}
}

// TestCheckOverTheWire checks that failures reach the engine naming their
// property, and that defaults come back in the checked inputs.
func TestCheckOverTheWire(t *testing.T) {
	p := New()
	resp, err := p.Check(context.Background(), &pulumirpc.CheckRequest{
		Urn:  testURN + RandomType + "::r",
		News: structOf(t, props(map[string]any{"length": 0})),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Failures) != 1 || resp.Failures[0].Property != "length" ||
		resp.Failures[0].Reason != "length: must be a positive integer" {
		t.Errorf("failures = %v", resp.Failures)
	}
}

// TestServeSpeaksGRPC starts the real server and calls it as the engine
// would, over a TCP connection.
func TestServeSpeaksGRPC(t *testing.T) {
	h, err := Serve()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		h.Shutdown()
		if err := <-h.Done; err != nil {
			t.Errorf("server stopped with %v", err)
		}
	}()
	conn, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(h.Port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pulumirpc.NewResourceProviderClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := client.GetPluginInfo(ctx, &emptypb.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != Version {
		t.Errorf("version = %q", info.Version)
	}
	schema, err := client.GetSchema(ctx, &pulumirpc.GetSchemaRequest{Version: 0})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(schema.Schema, `"stackyardtest:index:File"`) {
		t.Errorf("schema = %.200s...", schema.Schema)
	}
	cfg, err := client.Configure(ctx, &pulumirpc.ConfigureRequest{AcceptSecrets: true})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.AcceptSecrets || !cfg.SupportsPreview {
		t.Errorf("configure = %v", cfg)
	}
}
