package helm_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestReadmeDocumentsEveryValue reads values.yaml and the Values table of
// the chart's README: every value is documented (itself, or a key above
// it), and every key the table names exists, so that neither drifts.
func TestReadmeDocumentsEveryValue(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(chartDir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	all := map[string]bool{} // every key path, leaves and maps
	var leaves []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		all[prefix] = true
		m, ok := v.(map[string]any)
		if !ok || len(m) == 0 {
			leaves = append(leaves, prefix)
			return
		}
		for k, sub := range m {
			walk(prefix+"."+k, sub)
		}
	}
	for k, v := range values {
		walk(k, v)
	}

	readme, err := os.ReadFile(filepath.Join(chartDir(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "\n## Values\n")
	if !ok {
		t.Fatal("the README has no section ## Values")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	documented := map[string]bool{}
	code := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.Split(line, "|")[1]
		last := ""
		for _, m := range code.FindAllStringSubmatch(cell, -1) {
			key := m[1]
			if strings.HasPrefix(key, ".") { // `a.b.c`, `.d` is a.b.d
				i := strings.LastIndex(last, ".")
				if i < 0 {
					t.Errorf("README: %q follows no key with a parent", key)
					continue
				}
				key = last[:i] + key
			}
			documented[key], last = true, key
			if !all[key] {
				t.Errorf("README documents %s, which values.yaml does not have", key)
			}
		}
	}
	sort.Strings(leaves)
	for _, leaf := range leaves {
		found := false
		for p := leaf; p != ""; {
			if documented[p] {
				found = true
				break
			}
			i := strings.LastIndex(p, ".")
			if i < 0 {
				break
			}
			p = p[:i]
		}
		if !found {
			t.Errorf("values.yaml has %s, which the README's Values table does not document", leaf)
		}
	}
}
