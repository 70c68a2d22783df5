package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackyard/stackyard/test/testenv"
)

// TestReconcilersAreBuiltOneWay: every controller's Reconciler is built
// the same way, as a struct literal with its exported dependencies and
// settings, and registered with SetupWithManager, which fills in the
// defaults. A constructor function (New, NewReconciler) returning a
// Reconciler would be a second style.
func TestReconcilersAreBuiltOneWay(t *testing.T) {
	root := filepath.Join(testenv.RepoRoot(), "internal", "controller")
	dirs, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	withReconciler := 0
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		dir := filepath.Join(root, d.Name())
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		var hasType, hasSetup bool
		for _, e := range entries {
			name := e.Name()
			if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, decl := range f.Decls {
				switch decl := decl.(type) {
				case *ast.GenDecl:
					for _, spec := range decl.Specs {
						if ts, ok := spec.(*ast.TypeSpec); ok && ts.Name.Name == "Reconciler" {
							hasType = true
						}
					}
				case *ast.FuncDecl:
					if decl.Recv != nil {
						if decl.Name.Name == "SetupWithManager" {
							hasSetup = true
						}
						continue
					}
					if decl.Name.IsExported() && returnsReconciler(decl.Type) {
						t.Errorf("internal/controller/%s: func %s returns a Reconciler: build it as a struct literal "+
							"and fill in defaults in SetupWithManager, as every controller does", d.Name(), decl.Name.Name)
					}
				}
			}
		}
		if hasType {
			withReconciler++
			if !hasSetup {
				t.Errorf("internal/controller/%s: its Reconciler has no SetupWithManager", d.Name())
			}
		}
	}
	if withReconciler < 10 {
		t.Fatalf("found %d Reconcilers under internal/controller: the walk is broken", withReconciler)
	}
}

// returnsReconciler reports whether a function's results include a
// Reconciler or a pointer to one.
func returnsReconciler(ft *ast.FuncType) bool {
	if ft.Results == nil {
		return false
	}
	for _, r := range ft.Results.List {
		typ := r.Type
		if star, ok := typ.(*ast.StarExpr); ok {
			typ = star.X
		}
		if id, ok := typ.(*ast.Ident); ok && id.Name == "Reconciler" {
			return true
		}
	}
	return false
}
