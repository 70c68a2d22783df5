// Package layout guards the architecture the directory tree shows: a
// controller under internal/controller never imports another, and the
// packages they share (the domain package internal/change, and
// internal/stackrun, which builds what a Stack runs) import no
// controller, directly or not.
package layout

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stackyard/stackyard/test/testenv"
)

const module = "github.com/stackyard/stackyard/"

// imports are the module packages the non-test Go files of dir import.
func imports(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if rest, ok := strings.CutPrefix(path, module); ok {
				seen[rest] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// TestControllersDoNotImportEachOther: one reconciler a package, none
// leaning on another's; what they share is in api/, internal/change or
// internal/stackrun.
func TestControllersDoNotImportEachOther(t *testing.T) {
	root := testenv.RepoRoot()
	dirs, err := os.ReadDir(filepath.Join(root, "internal", "controller"))
	if err != nil {
		t.Fatal(err)
	}
	controllers := 0
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		controllers++
		for _, imp := range imports(t, filepath.Join(root, "internal", "controller", d.Name())) {
			other, ok := strings.CutPrefix(imp, "internal/controller/")
			if !ok {
				continue
			}
			other, _, _ = strings.Cut(other, "/")
			if other == d.Name() {
				continue
			}
			t.Errorf("internal/controller/%s imports internal/controller/%s: controllers never import each other; "+
				"put what they share in api/, internal/change or internal/stackrun", d.Name(), other)
		}
	}
	if controllers < 10 {
		t.Fatalf("found %d controllers under internal/controller: the walk is broken", controllers)
	}
}

// TestSharedPackagesImportNoController: the packages the controllers
// share sit below them, whatever they import on the way.
func TestSharedPackagesImportNoController(t *testing.T) {
	root := testenv.RepoRoot()
	for _, shared := range []string{"internal/change", "internal/stackrun"} {
		seen := map[string]bool{}
		var walk func(pkg string, path []string)
		walk = func(pkg string, path []string) {
			if seen[pkg] {
				return
			}
			seen[pkg] = true
			if strings.HasPrefix(pkg, "internal/controller/") {
				t.Errorf("%s imports %s (through %s)", shared, pkg, strings.Join(path, " -> "))
				return
			}
			for _, imp := range imports(t, filepath.Join(root, pkg)) {
				walk(imp, append(slices.Clone(path), imp))
			}
		}
		walk(shared, []string{shared})
		if len(seen) < 3 {
			t.Fatalf("walked only %v from %s: the walk is broken", seen, shared)
		}
	}
}
