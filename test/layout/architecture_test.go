package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stackyard/stackyard/test/testenv"
)

// metricName is the name of one of stackyard's own metrics.
var metricName = regexp.MustCompile(`^stackyard_[a-z0-9_]+$`)

// TestArchitectureNamesEverything: docs/architecture.md names every
// controller package, every package under internal/ and every metric the
// code defines, so that the document cannot fall behind the code
// unnoticed.
func TestArchitectureNamesEverything(t *testing.T) {
	root := testenv.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	named := func(what string) bool { return strings.Contains(doc, "`"+what+"`") }

	for _, parent := range []string{"internal", "internal/controller"} {
		entries, err := os.ReadDir(filepath.Join(root, parent))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if pkg := parent + "/" + e.Name(); e.IsDir() && !named(pkg) {
				t.Errorf("docs/architecture.md does not name %s: say what it is for", pkg)
			}
		}
	}
	metrics := definedMetrics(t, filepath.Join(root, "internal"))
	if len(metrics) < 9 {
		t.Fatalf("found only the metrics %v: the search is broken", metrics)
	}
	for _, m := range metrics {
		if !named(m) {
			t.Errorf("docs/architecture.md does not name the metric %s: add it to the table under Metrics", m)
		}
	}
}

// definedMetrics are the metric names in the non-test Go files under dir
// that import the Prometheus client: every string literal shaped like one
// of stackyard's metric names.
func definedMetrics(t *testing.T, dir string) []string {
	t.Helper()
	seen := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		prometheus := false
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, "github.com/prometheus/client_golang/") {
				prometheus = true
			}
		}
		if !prometheus {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && metricName.MatchString(s) {
					seen[s] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	return out
}
