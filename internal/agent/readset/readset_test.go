package readset

import (
	"strings"
	"testing"
)

func TestEncodeDecode(t *testing.T) {
	s := Set{}
	s.Add("Secret", "creds", "41")
	s.Add("ConfigMap", "settings", "7")
	s.Add("Secret", "optional-gone", "")
	text := s.Encode()
	if want := "ConfigMap/settings=7;Secret/creds=41;Secret/optional-gone="; text != want {
		t.Fatalf("Encode = %q, want %q", text, want)
	}
	back, err := Decode(text)
	if err != nil {
		t.Fatal(err)
	}
	if back.Encode() != text || len(back) != 3 {
		t.Fatalf("Decode(Encode(s)) = %v", back)
	}
	if empty, err := Decode(""); err != nil || len(empty) != 0 {
		t.Fatalf("Decode(\"\") = %v, %v", empty, err)
	}
}

func TestDecodeRefuses(t *testing.T) {
	for text, want := range map[string]string{
		"Secret/creds":                  "want <Kind>/<name>=<resourceVersion>",
		"Pod/x=1":                       `kind "Pod"`,
		"Secret/=1":                     "is not an object name",
		"Secret/a/b=1":                  "is not an object name",
		"Secret/a=1=2":                  "is not a resourceVersion",
		"Secret/a=1;Secret/a=2":         "listed twice",
		"Secret/a=1;;ConfigMap/b=2":     "entry 1",
		"ConfigMap/settings=7;Secret/x": "entry 1",
	} {
		if _, err := Decode(text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Decode(%q) = %v, want an error with %q", text, err, want)
		}
	}
}

func TestMismatch(t *testing.T) {
	held := Set{"Secret/creds": "41", "ConfigMap/settings": ""}
	cases := []struct {
		name    string
		checked Set
		want    string
	}{
		{"the same versions, and one the agent does not read", Set{"Secret/creds": "41", "ConfigMap/settings": "", "Secret/unused": "3"}, ""},
		{"a Secret written since the agent started", Set{"Secret/creds": "42", "ConfigMap/settings": ""},
			"Secret/creds at resourceVersion 41, and the operator checked resourceVersion 42"},
		{"a ConfigMap made since", Set{"Secret/creds": "41", "ConfigMap/settings": "9"},
			"ConfigMap/settings at no version (it did not exist), and the operator checked resourceVersion 9"},
		{"an object the operator did not check", Set{"Secret/creds": "41"}, "ConfigMap/settings, which the operator did not check"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Mismatch(held, tc.checked)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("Mismatch = %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzDecode: whatever Decode accepts, Encode writes back to a text that
// decodes to the same Set.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{"", "Secret/a=1", "ConfigMap/b=;Secret/a=2", "Secret/a=1;Secret/a=1", "x"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Decode(text)
		if err != nil {
			return
		}
		again, err := Decode(s.Encode())
		if err != nil {
			t.Fatalf("Decode(Encode(%v)): %v", s, err)
		}
		if again.Encode() != s.Encode() {
			t.Fatalf("round trip changed %q to %q", s.Encode(), again.Encode())
		}
	})
}
