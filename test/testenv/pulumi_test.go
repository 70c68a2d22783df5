package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// TestBuildStackyardCopiesPrebuilt checks the path make test takes: both
// binaries are copied, executable, and a later change to the prebuilt ones
// does not reach a package's copies.
func TestBuildStackyardCopiesPrebuilt(t *testing.T) {
	prebuilt, dir := t.TempDir(), t.TempDir()
	for _, name := range stackyardBinaries {
		if err := os.WriteFile(filepath.Join(prebuilt, name), []byte(name+" v1"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(PrebuiltEnv, prebuilt)
	out, err := BuildStackyard(dir)
	if err != nil {
		t.Fatal(err)
	}
	if out != filepath.Join(dir, "stackyard") {
		t.Errorf("BuildStackyard = %q, want stackyard in %s", out, dir)
	}
	for _, name := range stackyardBinaries {
		if err := os.WriteFile(filepath.Join(prebuilt, name), []byte(name+" v2"), 0o755); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != name+" v1" {
			t.Errorf("%s reads %q after the prebuilt one changed, want %q", name, got, name+" v1")
		}
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode().Perm()&0o111 == 0 {
			t.Errorf("%s is not executable: %v %v", name, fi.Mode(), err)
		}
	}

	// A missing prebuilt binary is an error that names the variable.
	if _, err := BuildStackyard(t.TempDir()); err != nil {
		t.Fatalf("a second copy failed: %v", err)
	}
	t.Setenv(PrebuiltEnv, t.TempDir())
	if _, err := BuildStackyard(t.TempDir()); err == nil {
		t.Error("an empty prebuilt directory was accepted")
	}
}
