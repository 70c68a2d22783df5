package valuediff

import (
	"encoding/json"
	"strings"
	"testing"
)

// step decodes a resourcePreEvent's metadata written as JSON.
func step(t *testing.T, js string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// secretJSON is a secret as the engine serializes it in events: blinded.
const secretJSON = `{"4dabf18193072939515e22adb298388d":"1b47061264138c4ac30d75fd1eb44270","ciphertext":"[secret]"}`

func TestFromStep(t *testing.T) {
	tests := []struct {
		name string
		md   string
		want []Property
	}{
		{
			name: "a plain value, with the replacement it forces",
			md: `{"op":"replace","urn":"u","type":"t","diffs":["path"],"detailedDiff":{"path":{"diffKind":"update-replace"}},
				"old":{"inputs":{"path":"/a","content":"x"}},"new":{"inputs":{"path":"/b","content":"x"}}}`,
			want: []Property{{Path: "path", Kind: KindUpdate, Old: `"/a"`, New: `"/b"`, Replaces: true}},
		},
		{
			name: "a secret changed: blinded on both sides, changed because the engine says so",
			md: `{"op":"update","urn":"u","diffs":["content"],"detailedDiff":{"content":{"diffKind":"update"}},
				"old":{"inputs":{"content":` + secretJSON + `}},"new":{"inputs":{"content":` + secretJSON + `}}}`,
			want: []Property{{Path: "content", Kind: KindUpdate, Old: `"[secret]"`, New: `"[secret]"`}},
		},
		{
			name: "a nested object and array, leaf by leaf; an unchanged secret beside them is not reported",
			md: `{"op":"update","urn":"u","diffs":["keepers"],"detailedDiff":{"keepers.nested.a":{"diffKind":"update"},"keepers.nested.list[1]":{"diffKind":"update"},"keepers.added":{"diffKind":"add"}},
				"old":{"inputs":{"keepers":{"gen":"1","token":` + secretJSON + `,"nested":{"a":"1","list":[1,"1"]}}}},
				"new":{"inputs":{"keepers":{"gen":"1","token":` + secretJSON + `,"nested":{"a":"2","list":[1,"2"]},"added":true}}}}`,
			want: []Property{
				{Path: "keepers.added", Kind: KindAdd, New: `true`},
				{Path: "keepers.nested.a", Kind: KindUpdate, Old: `"1"`, New: `"2"`},
				{Path: "keepers.nested.list[1]", Kind: KindUpdate, Old: `"1"`, New: `"2"`},
			},
		},
		{
			name: "keys that are not identifiers, and a removed element",
			md: `{"op":"update","urn":"u","diffs":["tags"],
				"old":{"inputs":{"tags":{"app.kubernetes.io/name":"web","list":[1,2]}}},"new":{"inputs":{"tags":{"app.kubernetes.io/name":"api","list":[1]}}}}`,
			want: []Property{
				{Path: `tags["app.kubernetes.io/name"]`, Kind: KindUpdate, Old: `"web"`, New: `"api"`},
				{Path: "tags.list[1]", Kind: KindDelete, Old: `2`},
			},
		},
		{
			name: "a create lists every input; unknowns are masked",
			md:   `{"op":"create","urn":"u","new":{"inputs":{"length":12,"keepers":{"id":"04da6b54-80e4-46f7-96ec-b56ff0331ba9"}}}}`,
			want: []Property{
				{Path: "keepers.id", Kind: KindAdd, New: `"[unknown]"`},
				{Path: "length", Kind: KindAdd, New: `12`},
			},
		},
		{
			name: "a delete lists every input, a secret masked",
			md:   `{"op":"delete","urn":"u","old":{"inputs":{"password":` + secretJSON + `}}}`,
			want: []Property{{Path: "password", Kind: KindDelete, Old: `"[secret]"`}},
		},
		{
			name: "no detailed diff: replace keys say what replaces",
			md: `{"op":"replace","urn":"u","diffs":["size","name"],"keys":["name"],
				"old":{"inputs":{"name":"a","size":1}},"new":{"inputs":{"name":"b","size":2}}}`,
			want: []Property{
				{Path: "name", Kind: KindUpdate, Old: `"a"`, New: `"b"`, Replaces: true},
				{Path: "size", Kind: KindUpdate, Old: `1`, New: `2`},
			},
		},
		{
			name: "an asset by its hash, never its text",
			md: `{"op":"update","urn":"u","diffs":["code"],
				"old":{"inputs":{"code":{"4dabf18193072939515e22adb298388d":"c44067f5952c0a294b673a41bacd8c17","hash":"aa","text":"old text"}}},
				"new":{"inputs":{"code":{"4dabf18193072939515e22adb298388d":"c44067f5952c0a294b673a41bacd8c17","hash":"bb","text":"new text"}}}}`,
			want: []Property{{Path: "code", Kind: KindUpdate, Old: `"[asset sha256:aa]"`, New: `"[asset sha256:bb]"`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FromStep(step(t, tt.md))
			if len(got.Properties) != len(tt.want) {
				t.Fatalf("properties = %+v, want %+v", got.Properties, tt.want)
			}
			for i := range tt.want {
				if got.Properties[i] != tt.want[i] {
					t.Errorf("property %d = %+v, want %+v", i, got.Properties[i], tt.want[i])
				}
			}
		})
	}
}

func TestBounds(t *testing.T) {
	long := strings.Repeat("é", MaxValue)
	r := FromStep(map[string]any{"op": "update", "diffs": []any{"v"},
		"old": map[string]any{"inputs": map[string]any{"v": "a"}}, "new": map[string]any{"inputs": map[string]any{"v": long}}})
	if got := r.Properties[0].New; len(got) > MaxValue+40 || !strings.Contains(got, "more bytes)") || !strings.HasPrefix(got, `"é`) {
		t.Errorf("a long value rendered as %d bytes: %.60q", len(got), got)
	}

	many := map[string]any{}
	for i := range 2 * MaxProperties {
		many[strings.Repeat("k", 1+i%7)+string(rune('a'+i%26))+strings.Repeat("x", i/26)] = i
	}
	r = FromStep(map[string]any{"op": "create", "new": map[string]any{"inputs": many}})
	if len(r.Properties) != MaxProperties || !r.Truncated {
		t.Errorf("a create of %d inputs kept %d properties (truncated %v)", len(many), len(r.Properties), r.Truncated)
	}

	var d Diff
	for range MaxResources + 1 {
		d.Add(Resource{URN: "u", Op: "update", Properties: []Property{{Path: "v", Kind: KindUpdate, Old: long, New: long}}})
	}
	d.Add(Resource{URN: "same", Op: "same"})
	if len(d.Resources) != MaxResources || !d.Truncated {
		t.Fatalf("kept %d resources (truncated %v)", len(d.Resources), d.Truncated)
	}
	b, err := Encode(d)
	if err != nil || len(b) > MaxEncoded {
		t.Fatalf("encoded %d bytes, err %v", len(b), err)
	}
	back, err := Decode(b)
	if err != nil || !back.ValuesDropped || back.Resources[0].Properties[0].Old == "" || back.Resources[MaxResources-1].Properties[0].Old != "" {
		t.Errorf("decoded: dropped %v, first %q, last %q, err %v", back.ValuesDropped, back.Resources[0].Properties[0].Old[:10], back.Resources[MaxResources-1].Properties[0].Old, err)
	}
}

func TestSplitPath(t *testing.T) {
	for path, want := range map[string]string{
		"a":                  "a",
		"a.b[2].c":           "a|b|2|c",
		`tags["app.io/x"].y`: "tags|app.io/x|y",
		`["we]ird"][0]`:      "we]ird|0",
		"":                   "",
		`a["unterminated`:    `a|["unterminated`,
		"list[1]":            "list|1",
	} {
		if got := strings.Join(splitPath(path), "|"); got != want {
			t.Errorf("splitPath(%q) = %q, want %q", path, got, want)
		}
	}
}

// FuzzFromStep: whatever the metadata, FromStep does not panic, stays
// within its bounds, and never shows a secret's ciphertext.
func FuzzFromStep(f *testing.F) {
	f.Add(`{"op":"update","diffs":["a"],"detailedDiff":{"a[0]":{"diffKind":"update"}},"old":{"inputs":{"a":[` + secretJSON + `]}},"new":{"inputs":{"a":[1]}}}`)
	f.Add(`{"op":"create","new":{"inputs":{"a":{"b":{"c":[1,2,{"d":null}]}}}}}`)
	f.Add(`{"op":"replace","keys":["x"],"detailedDiff":{"[\"x\"].y":{"diffKind":"add-replace"}},"old":{"inputs":{"x":1}},"new":{"inputs":{"x":{"y":2}}}}`)
	f.Fuzz(func(t *testing.T, js string) {
		var md map[string]any
		if json.Unmarshal([]byte(js), &md) != nil {
			return
		}
		r := FromStep(md)
		if len(r.Properties) > MaxProperties {
			t.Fatalf("%d properties", len(r.Properties))
		}
		for _, p := range r.Properties {
			if len(p.Old) > MaxValue+40 || len(p.New) > MaxValue+40 {
				t.Fatalf("value of %d/%d bytes", len(p.Old), len(p.New))
			}
		}
	})
}
