package redact

import (
	"reflect"
	"sync"
	"testing"
)

func TestRedact(t *testing.T) {
	for _, tc := range []struct {
		name    string
		secrets []string
		text    string
		want    string
	}{
		{name: "no secrets", text: "nothing to hide", want: "nothing to hide"},
		{name: "empty secret matches nothing", secrets: []string{""}, text: "abc", want: "abc"},
		{name: "every occurrence", secrets: []string{"hunter2"}, text: "hunter2 and hunter2", want: "[secret] and [secret]"},
		{name: "longest first", secrets: []string{"abc", "abcdef"}, text: "x abcdef y abc z", want: "x [secret] y [secret] z"},
		{name: "order of adding does not matter", secrets: []string{"abcdef", "abc"}, text: "abcdef abc", want: "[secret] [secret]"},
		{name: "duplicates", secrets: []string{"pw", "pw"}, text: "pw", want: "[secret]"},
		{name: "placeholder is not matched again", secrets: []string{"token", "secret"}, text: "token secret", want: "[secret] [secret]"},
		{name: "multi-line secret", secrets: []string{"line1\nline2"}, text: "key: line1\nline2\n", want: "key: [secret]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := New(tc.secrets...).Redact(tc.text); got != tc.want {
				t.Errorf("Redact(%q) with %q = %q, want %q", tc.text, tc.secrets, got, tc.want)
			}
		})
	}
}

func TestAddLater(t *testing.T) {
	s := New()
	if got := s.Redact("abc"); got != "abc" {
		t.Fatalf("an empty Set changed the text: %q", got)
	}
	s.Add("abc")
	s.Add("abcdef")
	if got := s.Redact("abcdef abc"); got != "[secret] [secret]" {
		t.Errorf("after Add: %q", got)
	}
}

func TestNilSet(t *testing.T) {
	var s *Set
	if got := s.Redact("abc"); got != "abc" {
		t.Errorf("a nil Set changed the text: %q", got)
	}
}

// TestConcurrent adds and redacts from several goroutines; run with -race.
func TestConcurrent(t *testing.T) {
	s := New()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(2)
		go func() { defer wg.Done(); s.Add(string(rune('a'+i)) + "-secret") }()
		go func() { defer wg.Done(); _ = s.Redact("a-secret b-secret") }()
	}
	wg.Wait()
	if got := s.Redact("a-secret h-secret"); got != "[secret] [secret]" {
		t.Errorf("after concurrent Adds: %q", got)
	}
}

// TestAddJSON checks that a secret document is removed whole and in
// parts, leaving out parts too short to hide anything.
func TestAddJSON(t *testing.T) {
	s := New()
	s.AddJSON(`{"user":"admin","hosts":["db.internal"],"port":5432,"id":"x1","n":7}`)
	for text, want := range map[string]string{
		`{"user":"admin","hosts":["db.internal"],"port":5432,"id":"x1","n":7}`: "[secret]",
		"connecting as admin to db.internal:5432":                              "connecting as [secret] to [secret]:[secret]",
		"row x1 has 7 items": "row x1 has 7 items",
	} {
		if got := s.Redact(text); got != want {
			t.Errorf("Redact(%q) = %q, want %q", text, got, want)
		}
	}
	notJSON := New()
	notJSON.AddJSON("plain secret {")
	if got := notJSON.Redact("it is plain secret {!"); got != "it is [secret]!" {
		t.Errorf("a non-JSON document: %q", got)
	}
}

// TestRedactDecoded checks that every string inside a decoded JSON value
// is redacted in place, at any depth, and that nothing else changes.
func TestRedactDecoded(t *testing.T) {
	s := New("hunter2")
	v := map[string]any{
		"message": "password hunter2",
		"hunter2": 1.0,
		"nested":  map[string]any{"list": []any{"hunter2", 2.0, []any{"x hunter2"}, map[string]any{"k": "hunter2!"}}},
		"flag":    true,
	}
	s.RedactDecoded(v)
	want := map[string]any{
		"message": "password [secret]",
		"hunter2": 1.0,
		"nested":  map[string]any{"list": []any{"[secret]", 2.0, []any{"x [secret]"}, map[string]any{"k": "[secret]!"}}},
		"flag":    true,
	}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("RedactDecoded = %v\nwant %v", v, want)
	}
	var none *Set
	none.RedactDecoded(v) // a nil Set changes nothing
	if !reflect.DeepEqual(v, want) {
		t.Errorf("a nil Set changed %v", v)
	}
}
