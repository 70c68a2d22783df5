// Package layout guards the architecture the directory tree shows: a
// controller under internal/controller never imports another, and the
// domain package internal/change imports no controller, directly or not.
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

// leftover are the imports between controllers that are still to be
// removed (issue 47), each with what it is for. The list only shrinks: an
// import not on it fails, and so does one on it that is gone.
var leftover = map[string]string{
	"promotion -> pipeline": "GitAuth, the pipeline's git credentials, for the promotion's code review",
	"promotion -> stack":    "SourceAt, BuildWorkspace, BuildUpdate, StackNameLabel, NotCounted: the builders of a preview",
	"pullrequest -> stack":  "SourceAt, BuildWorkspace, BuildUpdate, StackNameLabel: the builders of a preview",
}

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
// leaning on another's; what they share is in api/ or internal/change.
func TestControllersDoNotImportEachOther(t *testing.T) {
	root := testenv.RepoRoot()
	dirs, err := os.ReadDir(filepath.Join(root, "internal", "controller"))
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		for _, imp := range imports(t, filepath.Join(root, "internal", "controller", d.Name())) {
			other, ok := strings.CutPrefix(imp, "internal/controller/")
			if !ok {
				continue
			}
			other, _, _ = strings.Cut(other, "/")
			if other == d.Name() {
				continue
			}
			edge := d.Name() + " -> " + other
			found[edge] = true
			if _, known := leftover[edge]; !known {
				t.Errorf("internal/controller/%s imports internal/controller/%s: controllers never import each other; "+
					"put what they share in api/ or internal/change", d.Name(), other)
			}
		}
	}
	for edge := range leftover {
		if !found[edge] {
			t.Errorf("%s is gone: take it off the list of leftovers", edge)
		}
	}
}

// TestChangeImportsNoController: the domain package sits below the
// controllers, whatever it imports on the way.
func TestChangeImportsNoController(t *testing.T) {
	root := testenv.RepoRoot()
	seen := map[string]bool{}
	var walk func(pkg string, path []string)
	walk = func(pkg string, path []string) {
		if seen[pkg] {
			return
		}
		seen[pkg] = true
		if strings.HasPrefix(pkg, "internal/controller/") {
			t.Errorf("internal/change imports %s (through %s)", pkg, strings.Join(path, " -> "))
			return
		}
		for _, imp := range imports(t, filepath.Join(root, pkg)) {
			walk(imp, append(slices.Clone(path), imp))
		}
	}
	walk("internal/change", []string{"internal/change"})
	if len(seen) < 3 {
		t.Fatalf("walked only %v: the walk is broken", seen)
	}
}
