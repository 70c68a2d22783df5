package change

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
)

// diffSpecBase is the spec each case of TestDiffSpecs changes.
func diffSpecBase() shared.StackSpec {
	return shared.StackSpec{
		Stack:     "prod",
		GitSource: &shared.GitSource{ProjectRepo: "https://git.example/x.git", Commit: strings.Repeat("a", 40)},
		Config:    map[string]apiextensionsv1.JSON{"web:message": {Raw: []byte(`"first"`)}},
		Secrets:   map[string]string{"db:password": "hunter2-approved"},
		EnvRefs:   map[string]shared.ResourceRef{"TOKEN": shared.NewLiteralResourceRef("literal-token-approved")},
	}
}

// diffOf is DiffSpecs of the snapshots of prev and next, with both.
func diffOf(t *testing.T, prev, next *shared.StackSpec) (a, b *apiextensionsv1.JSON, changes []shared.SpecChange, truncated bool) {
	t.Helper()
	a, err := SpecSnapshot(prev)
	if err != nil {
		t.Fatal(err)
	}
	if b, err = SpecSnapshot(next); err != nil {
		t.Fatal(err)
	}
	if changes, truncated, err = DiffSpecs(a, b); err != nil {
		t.Fatal(err)
	}
	return a, b, changes, truncated
}

// TestDiffSpecs: a held spec is shown field by field against the
// approved one, and no secret value given inline is ever shown.
func TestDiffSpecs(t *testing.T) {
	for _, tt := range []struct {
		name      string
		edit      func(*shared.StackSpec)
		want      []string // "op path old -> new", old and new as JSON
		truncated bool
	}{
		{name: "nothing", edit: func(*shared.StackSpec) {}},
		{name: "the commit alone, which a promotion pins", edit: func(s *shared.StackSpec) { s.Commit = strings.Repeat("b", 40) }},
		{name: "a config value", edit: func(s *shared.StackSpec) { s.Config["web:message"] = apiextensionsv1.JSON{Raw: []byte(`"second"`)} },
			want: []string{`Changed config["web:message"] "first" -> "second"`}},
		{name: "a config key added and one removed", edit: func(s *shared.StackSpec) {
			s.Config = map[string]apiextensionsv1.JSON{"aws:region": {Raw: []byte(`"eu-west-1"`)}}
		}, want: []string{`Added config["aws:region"]  -> "eu-west-1"`, `Removed config["web:message"] "first" -> `}},
		{name: "the workspace image", edit: func(s *shared.StackSpec) {
			s.WorkspaceTemplate = &autov1alpha1.WorkspaceTemplate{Spec: &autov1alpha1.WorkspaceSpecTemplate{Image: ptr("evil/pulumi:latest")}}
		}, want: []string{`Added workspaceTemplate  -> {"spec":{"image":"evil/pulumi:latest"}}`}},
		{name: "a reference", edit: func(s *shared.StackSpec) { s.EnvRefs["DB"] = shared.NewSecretResourceRef("db", "password") },
			want: []string{`Added envRefs.DB  -> {"secret":{"key":"password","name":"db"},"type":"Secret"}`}},
		{name: "many fields", edit: func(s *shared.StackSpec) {
			for i := range MaxSpecChanges + 5 {
				s.Config[fmt.Sprintf("k:%03d", i)] = apiextensionsv1.JSON{Raw: []byte(`1`)}
			}
		}, truncated: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			prev, next := diffSpecBase(), diffSpecBase()
			tt.edit(&next)
			_, _, changes, truncated := diffOf(t, &prev, &next)
			if truncated != tt.truncated {
				t.Errorf("truncated = %v, want %v", truncated, tt.truncated)
			}
			if tt.truncated {
				if len(changes) != MaxSpecChanges {
					t.Errorf("%d changes, want %d", len(changes), MaxSpecChanges)
				}
				return
			}
			var got []string
			for _, c := range changes {
				got = append(got, fmt.Sprintf("%s %s %s -> %s", c.Op, c.Path, c.Old, c.New))
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestDiffSpecsHidesSecrets: a change to a secret value given inline
// shows as a change of its digest; neither value appears in the snapshot
// or the changes.
func TestDiffSpecsHidesSecrets(t *testing.T) {
	prev, next := diffSpecBase(), diffSpecBase()
	next.Secrets["db:password"] = "hunter2-held"
	next.EnvRefs["TOKEN"] = shared.NewLiteralResourceRef("literal-token-held")
	next.GitAuth = &shared.GitAuthConfig{BasicAuth: &shared.BasicAuth{UserName: shared.NewLiteralResourceRef("me"), Password: shared.NewLiteralResourceRef("git-password-held")}}
	a, b, changes, _ := diffOf(t, &prev, &next)
	var all strings.Builder
	all.Write(a.Raw)
	all.Write(b.Raw)
	paths := map[string]bool{}
	for _, c := range changes {
		paths[c.Path] = true
		fmt.Fprintf(&all, "%s %s %s\n", c.Path, c.Old, c.New)
		if c.Op == shared.SpecChangeChanged && (!strings.HasPrefix(c.Old, `"[secret `) || !strings.HasPrefix(c.New, `"[secret `)) {
			t.Errorf("%s: %s -> %s, want two digests", c.Path, c.Old, c.New)
		}
	}
	for _, secret := range []string{"hunter2", "literal-token", "git-password"} {
		if strings.Contains(all.String(), secret) {
			t.Errorf("a secret value (%s…) is shown:\n%s", secret, all.String())
		}
	}
	for _, p := range []string{`secrets["db:password"]`, "envRefs.TOKEN.literal.value"} {
		if !paths[p] {
			t.Errorf("no change listed at %s: %v", p, changes)
		}
	}
}

// FuzzDiffSpecs: whatever two configs hold, the diff neither fails nor
// shows an inline secret.
func FuzzDiffSpecs(f *testing.F) {
	f.Add("web:message", `"x"`, "secret-one", "secret-two")
	f.Fuzz(func(t *testing.T, key, value, secretA, secretB string) {
		if len(secretA) < 8 || len(secretB) < 8 {
			return // too short to tell from the rest of the JSON
		}
		prev, next := diffSpecBase(), diffSpecBase()
		prev.Secrets["s"], next.Secrets["s"] = secretA, secretB
		if raw := []byte(value); json.Valid(raw) {
			next.Config[key] = apiextensionsv1.JSON{Raw: raw}
		}
		a, err := SpecSnapshot(&prev)
		if err != nil {
			return // an unencodable spec never reaches the API server
		}
		b, err := SpecSnapshot(&next)
		if err != nil {
			return
		}
		changes, _, err := DiffSpecs(a, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range changes {
			if c.Path == `secrets["s"]` || c.Path == "secrets.s" {
				if strings.Contains(c.Old, secretA) || strings.Contains(c.New, secretB) {
					t.Fatalf("secret shown: %+v", c)
				}
			}
		}
	})
}
