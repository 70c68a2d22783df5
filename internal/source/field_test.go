package source

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"testing"
)

// TestFieldsComplete checks that Fields lists every Field constant but
// FieldNone, once: controllers test their mappings against it.
func TestFieldsComplete(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "field.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); ok && id.Name == "Field" {
				for _, n := range v.Names {
					declared = append(declared, n.Name)
				}
			}
		}
	}
	seen := map[Field]bool{}
	for _, fl := range Fields {
		if seen[fl] {
			t.Errorf("Fields lists %q twice", fl)
		}
		seen[fl] = true
	}
	if len(declared) != len(Fields)+1 {
		t.Errorf("field.go declares %d Field constants %v; Fields must list all of them but FieldNone, it lists %d", len(declared), declared, len(Fields))
	}
	if slices.Contains(Fields, FieldNone) {
		t.Error("Fields lists FieldNone")
	}
}
