// Package docscheck keeps the documentation honest about the things it
// can be checked against: every `stackyard` command line in README.md and
// docs/*.md must name a real subcommand and real flags of the CLI
// (internal/cli), every `kubectl` command line must name resources that
// exist (our CRDs from config/crd/bases, or a short, named list of
// built-in and foreign ones), every `spec.…` or `status.…` path the
// prose names in code must exist in one of our CRDs' schemas, or in a
// named list of fields of foreign kinds, and every flag written alone in
// code (`--tool-dirs`) must be a stackyard command's, or in a named list
// of other programs' flags. Every relative link and image must point to
// a file or directory that exists, and every anchor (#x, page.md#x) into
// a document must be one of its headings' (as GitHub makes them) or
// explicit anchors', so that renaming a heading or a page fails; a
// document's contents list must list each of its level-2 sections. The
// generated references (docs/cli-reference.md, docs/api-reference.md)
// are left out: their generators own them. Their anchors are read,
// for the links into them.
//
// The package holds the parsers (Markdown, shell command lines, JSONPath
// templates, CRD schemas) and the checks; docscheck_test.go runs the
// checks over the repository's documents, so that the next drift fails
// CI with the file, the line and what was not found.
package docscheck
