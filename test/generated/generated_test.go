// Package generated fails when committed generated files (deepcopy functions,
// CRDs, RBAC, the API reference) no longer match what `make generate` makes from the sources: it
// regenerates in a copy of the repository and compares the two trees.
package generated

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackyard/stackyard/test/testenv"
)

// skipDirs are never copied: build output, local state and VCS metadata.
var skipDirs = map[string]bool{".git": true, "bin": true, ".stackyard": true, "node_modules": true}

// isGenerated reports whether a path (relative to the repository) is output
// of hack/generate-api.sh.
func isGenerated(rel string) bool {
	return strings.HasSuffix(rel, "zz_generated.deepcopy.go") ||
		strings.HasPrefix(rel, filepath.Join("config", "crd", "bases")+string(filepath.Separator)) ||
		rel == filepath.Join("config", "rbac", "role.yaml") ||
		rel == filepath.Join("docs", "api-reference.md")
}

// copyTree copies the sources needed to regenerate, leaving generated files
// out so that a file which would no longer be generated shows as stale.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			if skipDirs[d.Name()] {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() || isGenerated(rel) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// generatedFiles maps relative path → content of every generated file below root.
func generatedFiles(t *testing.T, root string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && skipDirs[d.Name()] {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, path)
		if d.Type().IsRegular() && isGenerated(rel) {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out[rel] = data
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGeneratedFilesAreCurrent(t *testing.T) {
	if err := testenv.RequireBinaries("controller-gen"); err != nil {
		t.Fatal(err)
	}
	repo := testenv.RepoRoot()
	tmp := t.TempDir()
	copyTree(t, repo, tmp)

	cmd := exec.Command(filepath.Join(repo, "hack", "generate-api.sh"), tmp)
	cmd.Env = append(os.Environ(), "CONTROLLER_GEN="+filepath.Join(testenv.BinDir(), "controller-gen"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generating in a copy of the repository: %v\n%s", err, out)
	}

	committed := generatedFiles(t, repo)
	fresh := generatedFiles(t, tmp)
	if len(fresh) == 0 {
		t.Fatal("generation produced no files: is hack/generate-api.sh pointing at the right paths?")
	}
	for rel, want := range fresh {
		got, ok := committed[rel]
		switch {
		case !ok:
			t.Errorf("%s is generated but not committed: run `make generate`", rel)
		case !bytes.Equal(got, want):
			t.Errorf("%s is stale: run `make generate`", rel)
		}
	}
	for rel := range committed {
		if _, ok := fresh[rel]; !ok {
			t.Errorf("%s is committed but no longer generated: delete it or run `make generate`", rel)
		}
	}
}
