package samebuild

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheck builds one tiny program three times without VCS information,
// where only the linker flags tell builds apart: twice alike, once with
// another stamped version.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"go.mod":  "module example.com/tiny\n\ngo 1.22\n",
		"main.go": "package main\n\nvar version string\n\nfunc main() { println(version) }\n",
	} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := func(name, version string) string {
		t.Helper()
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-buildvcs=false", "-ldflags", "-X main.version="+version, "-o", out, ".")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, b)
		}
		return out
	}
	a, b, other := build("a", "v1"), build("b", "v1"), build("other", "v2")
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	if err := Check(a, b); err != nil {
		t.Errorf("two builds alike: %v", err)
	}
	if err := Check(a, other); err == nil || !strings.Contains(err.Error(), "another build") || !strings.Contains(err.Error(), "main.version=v2") {
		t.Errorf("another stamped version: %v, want another build naming its flags", err)
	}
	if err := Check(a, script); err == nil || !strings.Contains(err.Error(), "no build information") {
		t.Errorf("a script: %v, want no build information", err)
	}
}
