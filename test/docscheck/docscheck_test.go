package docscheck

import (
	"os"
	"path"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stackyard/stackyard/internal/cli"
	"github.com/stackyard/stackyard/test/testenv"
)

// generated are the documents their generators write (hack/clidoc and
// the API reference generator): they are checked where they are made.
var generated = map[string]bool{"docs/cli-reference.md": true, "docs/api-reference.md": true}

// document is one Markdown file of the repository, parsed.
type document struct {
	name string // relative to the repository's root
	Document
}

// documents are README.md and docs/*.md but the generated ones.
func documents(t *testing.T) []document {
	t.Helper()
	var out []document
	for _, d := range allDocuments(t) {
		if !generated[d.name] {
			out = append(out, d)
		}
	}
	return out
}

// allDocuments are README.md and docs/*.md, the generated ones too.
func allDocuments(t *testing.T) []document {
	t.Helper()
	root := testenv.RepoRoot()
	names, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	names = append(names, filepath.Join(root, "README.md"))
	sort.Strings(names)
	var out []document
	for _, n := range names {
		rel, err := filepath.Rel(root, n)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, document{name: filepath.ToSlash(rel), Document: Parse(string(data))})
	}
	if len(out) < 12 {
		t.Fatalf("found only %d documents under %s: the search is broken", len(out), root)
	}
	return out
}

// checker checks against the real CLI and the CRDs of config/crd/bases.
func checker(t *testing.T) *Checker {
	t.Helper()
	crds, err := LoadCRDs(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases"))
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) < 10 {
		t.Fatalf("found only %d CRDs in config/crd/bases: the search is broken", len(crds))
	}
	return &Checker{CLI: cli.NewRootCommand(), CRDs: crds}
}

// checkAll runs check over every document, reports each problem as
// file:line and fails unless at least atLeast things were checked in
// all, so that a parser that finds nothing cannot pass.
func checkAll(t *testing.T, what string, atLeast int, check func(Document) (int, []Problem)) {
	t.Helper()
	checkEach(t, what, atLeast, func(d document) (int, []Problem) { return check(d.Document) })
}

// checkEach is checkAll with a check that needs the document's name.
func checkEach(t *testing.T, what string, atLeast int, check func(document) (int, []Problem)) {
	t.Helper()
	total := 0
	for _, d := range documents(t) {
		n, problems := check(d)
		total += n
		for _, p := range problems {
			t.Errorf("%s:%d: %s", d.name, p.Line, p.Msg)
		}
	}
	t.Logf("checked %d %s", total, what)
	if total < atLeast {
		t.Errorf("checked only %d %s, fewer than the %d the docs hold: the extraction is broken", total, what, atLeast)
	}
}

// linkChecker knows every document of allDocuments, and the other
// Markdown files they link to (deploy/helm/stackyard/README.md,
// CHANGELOG.md), so that anchors into those are checked too; it looks
// for files in the repository.
func linkChecker(t *testing.T) *LinkChecker {
	t.Helper()
	root := testenv.RepoRoot()
	c := &LinkChecker{
		Docs: map[string]Document{},
		Exists: func(p string) bool {
			_, err := os.Stat(filepath.Join(root, filepath.FromSlash(p)))
			return err == nil
		},
	}
	all := allDocuments(t)
	for _, d := range all {
		c.Docs[d.name] = d.Document
	}
	for _, d := range all {
		for _, l := range d.Links {
			to, _, err := resolve(d.name, l.Target)
			if err != nil || absoluteURL(l.Target) || path.Ext(to) != ".md" || c.Docs[to].Headings != nil {
				continue
			}
			if data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(to))); err == nil {
				c.Docs[to] = Parse(string(data))
			}
		}
	}
	return c
}

// TestDocsRunRealCommands: every `stackyard …` command line in the docs
// names a real subcommand, arguments it accepts and flags it has.
func TestDocsRunRealCommands(t *testing.T) {
	c := checker(t)
	checkAll(t, "stackyard command lines", 60, c.Stackyard)
}

// TestDocsNameRealResources: every `kubectl …` command line in the docs
// names resources that exist, and on our kinds fields that exist.
func TestDocsNameRealResources(t *testing.T) {
	c := checker(t)
	checkAll(t, "kubectl command lines", 80, c.Kubectl)
}

// TestDocsNameRealFields: every `spec.…` or `status.…` path the docs
// write in code exists in one of our CRDs (or is a foreign kind's field
// of foreignFields).
func TestDocsNameRealFields(t *testing.T) {
	c := checker(t)
	checkAll(t, "field paths", 100, c.Fields)
}

// TestDocsNameRealFlags: every flag the docs write alone in code is a
// stackyard command's, or another program's of foreignFlags.
func TestDocsNameRealFlags(t *testing.T) {
	c := checker(t)
	checkAll(t, "lone flags", 100, c.Flags)
}

// TestDocsLinksResolve: every relative link and image in the docs points
// to a file or directory that exists, and every anchor into a document
// is one of its headings' or explicit anchors, so that renaming a
// heading or a page fails here.
func TestDocsLinksResolve(t *testing.T) {
	c := linkChecker(t)
	checkEach(t, "relative links", 300, func(d document) (int, []Problem) { return c.Links(d.name) })
}

// TestDocsContentsListSections: a document's contents list lists every
// level-2 section of it.
func TestDocsContentsListSections(t *testing.T) {
	checkAll(t, "sections against contents lists", 20, Contents)
}
