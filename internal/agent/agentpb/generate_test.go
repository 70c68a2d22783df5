package agentpb_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"
)

// protocVersionLine matches the line of a generated header that names the
// protoc version, the only part that may legitimately differ between
// machines with another Debian release.
var protocVersionLine = regexp.MustCompile(`(?m)^//\s*(-\s*)?protoc\s+v?\S+\n`)

// TestGeneratedCodeIsFresh regenerates the code from agent.proto into a
// temporary directory and fails when it differs from the committed files,
// so that a change to the proto cannot land without its generated code.
func TestGeneratedCodeIsFresh(t *testing.T) {
	_, self, _, _ := runtime.Caller(0)
	pkgDir := filepath.Dir(self)
	script := filepath.Join(pkgDir, "..", "proto", "generate.sh")
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Fatalf("protoc is not installed: run `make protoc` (or `make test`, which installs it)")
	}

	out := t.TempDir()
	cmd := exec.Command(script, out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generate.sh failed: %v\n%s", err, b)
	}

	for _, name := range []string{"agent.pb.go", "agent_grpc.pb.go"} {
		want, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatalf("read regenerated %s: %v", name, err)
		}
		got, err := os.ReadFile(filepath.Join(pkgDir, name))
		if err != nil {
			t.Fatalf("read committed %s: %v", name, err)
		}
		want = protocVersionLine.ReplaceAll(want, nil)
		got = protocVersionLine.ReplaceAll(got, nil)
		if !bytes.Equal(want, got) {
			t.Errorf("%s is stale: run `make generate-proto` and commit the result", name)
		}
	}
}
