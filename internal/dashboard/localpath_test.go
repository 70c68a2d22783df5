package dashboard

import "testing"

func TestLocalPath(t *testing.T) {
	for in, want := range map[string]string{
		"/pipelines":                    "/pipelines",
		"/stacks?namespace=a&notice=x":  "/stacks?namespace=a",
		"/promotions/ns/qa-1?notice=ok": "/promotions/ns/qa-1",
		"":                              "/",
		"pipelines":                     "/",
		"//evil.example/x":              "/",
		"/%2Fevil.example":              "/",
		"/%5Cevil.example":              "/",
		"/\\evil.example":               "/",
		"/%09/evil.example":             "/",
		"/%0a/evil.example":             "/",
		"https://evil.example/":         "/",
		"javascript:alert(1)":           "/",
		"/stacks/a%20b":                 "/stacks/a%20b",
	} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}
