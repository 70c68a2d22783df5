package server_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/stackyard/stackyard/internal/agent/agenterr"
	"github.com/stackyard/stackyard/internal/agent/agentpb"
)

// configProgram echoes its configuration as outputs, so the tests can see
// what reached the program.
const configProgram = `name: cfgkinds
runtime: yaml
outputs:
  lit: ${lit}
  num: ${num}
  obj: ${obj}
  objB: ${obj.b[1]}
  fromEnv: ${fromEnv}
  fromFile: ${fromFile}
  fromJSONFile: ${fromJSONFile.x}
  nested: ${nested}
  namespaced: ${other:thing}
  sec: ${sec}
  secObjUser: ${secObj.user}
  secFromEnv: ${secFromEnv}
`

// Secret values the tests look for on the wire.
const (
	secretLiteral = "s3cr3t-literal-value"
	secretInObj   = "pw-in-object-9876"
	secretFromEnv = "env-s3cr3t-value"
)

func structured(t *testing.T, key string, v any, secret bool) *agentpb.ConfigItem {
	t.Helper()
	pv, err := structpb.NewValue(v)
	if err != nil {
		t.Fatal(err)
	}
	return &agentpb.ConfigItem{Key: key, Secret: secret, V: &agentpb.ConfigItem_Value{Value: pv}}
}

func fromEnv(key, env string, secret bool) *agentpb.ConfigItem {
	return &agentpb.ConfigItem{Key: key, Secret: secret, V: &agentpb.ConfigItem_ValueFrom{
		ValueFrom: &agentpb.ConfigValueFrom{Source: &agentpb.ConfigValueFrom_Env{Env: env}},
	}}
}

func fromFile(key, path string, json bool) *agentpb.ConfigItem {
	return &agentpb.ConfigItem{Key: key, V: &agentpb.ConfigItem_ValueFrom{
		ValueFrom: &agentpb.ConfigValueFrom{Source: &agentpb.ConfigValueFrom_Path{Path: path}, Json: json},
	}}
}

func pathItem(key, v string) *agentpb.ConfigItem {
	item := literal(key, v, false)
	item.Path = true
	return item
}

// TestConfigAndLifecycle sets every kind of config value in one call and
// runs preview, up, refresh (also as a drift check) and destroy of a
// program that echoes them. It checks that each value reaches the program,
// that events stream, that change counts are reported, and that secrets
// stay masked on the wire unless show_secrets is set.
func TestConfigAndLifecycle(t *testing.T) {
	h := newHarness(t, configProgram)
	t.Setenv("AGENT_TEST_FROM_ENV", "env-value")
	t.Setenv("AGENT_TEST_SECRET_ENV", secretFromEnv)
	textFile := filepath.Join(t.TempDir(), "mounted.txt")
	writeFile(t, textFile, "line1\nline2\n")
	jsonFile := filepath.Join(t.TempDir(), "mounted.json")
	writeFile(t, jsonFile, `{"x": "from-json"}`)

	h.selectStack()
	h.setConfig(
		literal("lit", "hello world", false),
		structured(t, "num", 42, false),
		structured(t, "obj", map[string]any{"a": 1, "b": []any{"x", "y"}}, false),
		fromEnv("fromEnv", "AGENT_TEST_FROM_ENV", false),
		fromFile("fromFile", textFile, false),
		fromFile("fromJSONFile", jsonFile, true),
		pathItem("nested.inner[0]", "p0"),
		pathItem("nested.flag", "true"),
		literal("other:thing", "namespaced-value", false),
		literal("sec", secretLiteral, true),
		structured(t, "secObj", map[string]any{"user": "admin", "password": secretInObj}, true),
		fromEnv("secFromEnv", "AGENT_TEST_SECRET_ENV", true),
	)

	preview := collect(h.client.Preview(h.ctx(), &agentpb.PreviewRequest{})).mustSucceed(t, "Preview")
	types := preview.eventTypes()
	if types["preludeEvent"] == 0 || types["summaryEvent"] == 0 || types["resourcePreEvent"] == 0 {
		t.Errorf("Preview events by type = %v; want prelude, resourcePre and summary events", types)
	}
	if got := preview.result.GetChanges()["create"]; got != 1 {
		t.Errorf("Preview changes = %v; want create: 1 (the stack)", preview.result.GetChanges())
	}
	if preview.result.GetSummary().GetKind() != "preview" {
		t.Errorf("Preview summary = %v", preview.result.GetSummary())
	}

	up := h.up(&agentpb.UpRequest{Message: "first"}).mustSucceed(t, "Up")
	if len(up.events) == 0 {
		t.Error("Up streamed no events")
	}
	res := up.result
	if res.GetSummary().GetKind() != "update" || res.GetSummary().GetMessage() != "first" {
		t.Errorf("Up summary = %v", res.GetSummary())
	}
	if res.GetChanges()["create"] != 1 {
		t.Errorf("Up changes = %v; want create: 1", res.GetChanges())
	}
	want := map[string]any{
		"lit":          "hello world",
		"num":          float64(42),
		"obj":          map[string]any{"a": float64(1), "b": []any{"x", "y"}},
		"objB":         "y",
		"fromEnv":      "env-value",
		"fromFile":     "line1\nline2\n",
		"fromJSONFile": "from-json",
		"nested":       map[string]any{"inner": []any{"p0"}, "flag": true},
		"namespaced":   "namespaced-value",
	}
	for name, v := range want {
		if got := output(t, res, name); !reflect.DeepEqual(got, v) {
			t.Errorf("output %s = %#v; want %#v", name, got, v)
		}
	}
	for _, name := range []string{"sec", "secObjUser", "secFromEnv"} {
		o := res.GetOutputs()[name]
		if !o.GetSecret() || o.GetValue() != nil {
			t.Errorf("secret output %s = %v; want secret with no value", name, o)
		}
	}
	assertNoSecrets(t, "Up", up.wireText())

	shown := h.up(&agentpb.UpRequest{ShowSecrets: true}).mustSucceed(t, "Up with show_secrets")
	if shown.result.GetChanges()["same"] != 1 {
		t.Errorf("second Up changes = %v; want same: 1", shown.result.GetChanges())
	}
	for name, v := range map[string]string{"sec": secretLiteral, "secObjUser": "admin", "secFromEnv": secretFromEnv} {
		o := shown.result.GetOutputs()[name]
		if !o.GetSecret() || o.GetValue().GetStringValue() != v {
			t.Errorf("output %s with show_secrets = %v; want secret %q", name, o, v)
		}
	}

	collect(h.client.Preview(h.ctx(), &agentpb.PreviewRequest{ExpectNoChanges: true})).mustSucceed(t, "Preview expecting no changes")

	refresh := collect(h.client.Refresh(h.ctx(), &agentpb.RefreshRequest{})).mustSucceed(t, "Refresh")
	if refresh.result.GetSummary().GetKind() != "refresh" || output(t, refresh.result, "lit") != "hello world" {
		t.Errorf("Refresh result = %v", refresh.result)
	}
	assertNoSecrets(t, "Refresh", refresh.wireText())
	drift := collect(h.client.Refresh(h.ctx(), &agentpb.RefreshRequest{PreviewOnly: true, ExpectNoChanges: true}))
	drift.mustSucceed(t, "drift check")

	destroy := collect(h.client.Destroy(h.ctx(), &agentpb.DestroyRequest{})).mustSucceed(t, "Destroy")
	if destroy.result.GetSummary().GetKind() != "destroy" || destroy.result.GetChanges()["delete"] != 1 {
		t.Errorf("Destroy result = %v", destroy.result)
	}
	if h.logs.String() == "" {
		t.Error("the agent logged nothing")
	}
	assertNoSecrets(t, "the agent's log", h.logs.String())
}

// assertNoSecrets fails when wire text holds a secret value.
func assertNoSecrets(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range []string{secretLiteral, secretInObj, secretFromEnv} {
		if strings.Contains(text, s) {
			t.Errorf("%s sent secret %q in plain text", what, s)
		}
	}
}

// TestConfigErrors checks that bad items fail with InvalidConfig naming the
// key, without echoing secret values, and that a rejected request changes
// nothing.
func TestConfigErrors(t *testing.T) {
	h := newHarness(t, configOnlyProgram)
	h.selectStack()
	missing := filepath.Join(t.TempDir(), "absent")
	badJSON := filepath.Join(t.TempDir(), "bad.json")
	writeFile(t, badJSON, `{"password": "`+secretLiteral+`"`)

	for _, tc := range []struct {
		name string
		item *agentpb.ConfigItem
		key  string
		text string
	}{
		{"key with two namespaces", literal("a:b:c", "v", false), "a:b:c", "a:b:c"},
		{"unset env var", fromEnv("fromEnv", "AGENT_TEST_UNSET_VARIABLE", true), "fromEnv", "AGENT_TEST_UNSET_VARIABLE"},
		{"missing file", fromFile("fromFile", missing, false), "fromFile", "absent"},
		{"bad JSON in a secret file", &agentpb.ConfigItem{Key: "j", Secret: true, V: &agentpb.ConfigItem_ValueFrom{
			ValueFrom: &agentpb.ConfigValueFrom{Source: &agentpb.ConfigValueFrom_Path{Path: badJSON}, Json: true},
		}}, "j", "JSON"},
		{"bad path", pathItem("list[x", "v"), "list[x", "list[x"},
		{"no value", &agentpb.ConfigItem{Key: "empty"}, "empty", "no value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.client.SetAllConfig(h.ctx(), &agentpb.SetAllConfigRequest{Config: []*agentpb.ConfigItem{
				literal("good", "must-not-be-set", false), tc.item,
			}})
			if agenterr.ReasonOf(err) != agenterr.InvalidConfig {
				t.Fatalf("reason %s, want InvalidConfig (error %v)", agenterr.ReasonOf(err), err)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q does not mention %q", err, tc.text)
			}
			if md := agenterr.MetadataOf(err); md["key"] != tc.key {
				t.Errorf("error metadata %v; want key %q", md, tc.key)
			}
			assertNoSecrets(t, "SetAllConfig error", err.Error())
		})
	}
	assertNoSecrets(t, "the agent's log", h.logs.String())
	// The good item of the rejected requests was not written.
	r := h.up(&agentpb.UpRequest{}).mustSucceed(t, "Up")
	if strings.Contains(r.wireText(), "must-not-be-set") {
		t.Error("a rejected SetAllConfig wrote part of its items")
	}
}

// TestConfigInStackConfigDir checks that values the agent writes into the
// stack settings itself land where the CLI reads them: in the project's
// stackConfigDir. Strings, paths with a ":" in a sub-key, numbers and
// objects are written without the CLI; a secret goes through it.
func TestConfigInStackConfigDir(t *testing.T) {
	h := newHarness(t, "name: cfgdir\nruntime: yaml\nstackConfigDir: settings\n"+
		"outputs:\n  lit: ${lit}\n  nested: ${nested}\n  num: ${num}\n  obj: ${obj}\n  sec: ${sec}\n")
	if err := os.MkdirAll(filepath.Join(h.dir, "settings"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.selectStack()
	got := h.commandsOf(func() {
		h.setConfig(literal("lit", "hello", false), pathItem("nested.inner[0]", "p0"), pathItem("nested.a:b", "colon"),
			structured(t, "num", 3, false), structured(t, "obj", map[string]any{"k": "v"}, false))
	})
	checkCommands(t, "setting values that are not secret", got, nil)
	got = h.commandsOf(func() { h.setConfig(literal("sec", secretLiteral, true)) })
	checkCommands(t, "setting a secret", got, []string{"config set-all"})
	up := h.up(&agentpb.UpRequest{ShowSecrets: true}).mustSucceed(t, "Up")
	for name, want := range map[string]any{
		"lit":    "hello",
		"nested": map[string]any{"inner": []any{"p0"}, "a:b": "colon"},
		"num":    float64(3),
		"obj":    map[string]any{"k": "v"},
	} {
		if got := output(t, up.result, name); !reflect.DeepEqual(got, want) {
			t.Errorf("output %s = %#v; want %#v", name, got, want)
		}
	}
	if o := up.result.GetOutputs()["sec"]; o.GetValue().GetStringValue() != secretLiteral {
		t.Errorf("output sec = %v; want the secret", o)
	}
	b, err := os.ReadFile(filepath.Join(h.dir, "settings", "Pulumi.dev.yaml"))
	if err != nil || !strings.Contains(string(b), "cfgdir:lit: hello") || strings.Contains(string(b), secretLiteral) {
		t.Errorf("settings/Pulumi.dev.yaml = %q (%v); want the plain values there, the secret encrypted", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(h.dir, "Pulumi.dev.yaml")); err == nil {
		t.Errorf("Pulumi.dev.yaml was written beside the project, where the CLI does not read it: %s", b)
	}
}

// TestConfigBesideAJSONProject checks that the stack settings of a project
// whose file is Pulumi.json are written as Pulumi.<stack>.json, the file
// the CLI reads (`pulumi config` shows the values), not as YAML beside it.
func TestConfigBesideAJSONProject(t *testing.T) {
	h := newHarness(t, "")
	writeFile(t, filepath.Join(h.dir, "Pulumi.json"), `{"name": "cfgjson", "runtime": "nodejs"}`)
	h.selectStack()
	checkCommands(t, "setting values that are not secret", h.commandsOf(func() {
		h.setConfig(literal("lit", "hello", false), structured(t, "num", 3, false))
	}), nil)
	if _, err := os.Stat(filepath.Join(h.dir, "Pulumi.dev.yaml")); err == nil {
		t.Error("Pulumi.dev.yaml was written beside a Pulumi.json project")
	}
	cmd := exec.Command("pulumi", "config", "--json", "--stack", "dev", "--non-interactive")
	cmd.Dir = h.dir
	cmd.Env = append(os.Environ(), "PULUMI_BACKEND_URL=file://"+h.backend)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pulumi config: %v", err)
	}
	var cfg map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatalf("pulumi config --json: %v\n%s", err, out)
	}
	// The CLI shows every scalar as its text.
	if cfg["cfgjson:lit"].Value != "hello" || fmt.Sprint(cfg["cfgjson:num"].Value) != "3" {
		t.Errorf("the CLI sees %q; want lit hello and num 3", out)
	}
}
