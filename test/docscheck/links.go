package docscheck

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"unicode"
)

// Slug is the anchor GitHub gives a heading that shows text: text in
// lower case, without every character but letters, digits, spaces,
// hyphens and underscores (in any script), each space made a hyphen.
// Parse makes a repeated slug unique in its document.
//
// GitHub computes it from the text the heading shows, so Parse gives it
// that: `code` without its backticks, a link's text without its target.
// An underscore of _emphasis_ is kept, where GitHub drops it; the docs'
// headings have none.
func Slug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// uniqueSlugs makes the slugs of headings unique as GitHub does: a
// heading whose slug an earlier one has gets "-1", the next "-2", and so
// on, skipping any already taken.
func uniqueSlugs(headings []Heading) []Heading {
	seen := map[string]int{}
	for i := range headings {
		base := headings[i].Slug
		slug := base
		for {
			if _, taken := seen[slug]; !taken {
				break
			}
			seen[base]++
			slug = fmt.Sprintf("%s-%d", base, seen[base])
		}
		seen[slug] = 0
		headings[i].Slug = slug
	}
	return headings
}

// HasAnchor reports whether id is an anchor of the document: one of its
// headings' slugs or one of its explicit anchors.
func (d Document) HasAnchor(id string) bool {
	for _, h := range d.Headings {
		if h.Slug == id {
			return true
		}
	}
	for _, a := range d.Anchors {
		if a == id {
			return true
		}
	}
	return false
}

// listItem matches the first line of a bullet list's item.
var listItem = regexp.MustCompile(`^\s*[-*+]\s+\S`)

// contentsList finds the contents list among the lines at the indexes
// prose, before the first level-2 heading of headings, and returns its
// links, or nil. A list is a run of items; an item goes on over the
// lines after its first up to a blank line, and over a blank line to
// lines indented under it; a heading or a code block ends the list.
func contentsList(lines []string, prose []int, headings []Heading, links []Link) []Link {
	end := len(lines) + 1 // the first level-2 heading's line
	for _, h := range headings {
		if h.Level == 2 {
			end = h.Line
			break
		}
	}
	var items [][2]int // the first and last line of each item of the list
	blank := false     // a blank line came after the last item's lines
	for n, i := range prose {
		if i+1 >= end {
			break
		}
		if n > 0 && prose[n-1] != i-1 {
			if c := contentsLinks(items, links); c != nil {
				return c
			}
			items, blank = nil, false
		}
		trimmed := strings.TrimSpace(lines[i])
		switch {
		case listItem.MatchString(lines[i]):
			items, blank = append(items, [2]int{i + 1, i + 1}), false
		case trimmed == "":
			blank = true
		case len(items) > 0 && !strings.HasPrefix(trimmed, "#") && (!blank || strings.HasPrefix(lines[i], "  ")):
			items[len(items)-1][1], blank = i+1, false
		default:
			if c := contentsLinks(items, links); c != nil {
				return c
			}
			items, blank = nil, false
		}
	}
	return contentsLinks(items, links)
}

// contentsLinks returns the links of the list whose items are at the
// lines items if it is a contents list, nil if not: every item must
// hold a link, and every link must be to an anchor of the document.
func contentsLinks(items [][2]int, links []Link) []Link {
	var out []Link
	for _, item := range items {
		n := 0
		for _, l := range links {
			if l.Line < item[0] || l.Line > item[1] {
				continue
			}
			if l.Image || !strings.HasPrefix(l.Target, "#") {
				return nil
			}
			out, n = append(out, l), n+1
		}
		if n == 0 {
			return nil
		}
	}
	return out
}

// Contents checks that the contents list of doc, if it has one, lists
// every level-2 heading of doc: links to its anchor. A missing one is
// reported at the list's first line, by its text. It returns how many
// headings it checked and what it found.
func Contents(doc Document) (checked int, problems []Problem) {
	if doc.Contents == nil {
		return 0, nil
	}
	listed := map[string]bool{}
	for _, l := range doc.Contents {
		if a, err := url.PathUnescape(strings.TrimPrefix(l.Target, "#")); err == nil {
			listed[a] = true
		}
	}
	for _, h := range doc.Headings {
		if h.Level != 2 {
			continue
		}
		checked++
		if !listed[h.Slug] {
			problems = append(problems, Problem{
				Line: doc.Contents[0].Line,
				Msg:  fmt.Sprintf("the contents list does not list the section %q (line %d): add [%s](#%s)", h.Text, h.Line, h.Text, h.Slug),
			})
		}
	}
	return checked, problems
}

// LinkChecker checks the links of documents: a relative link must point
// to a file or directory that exists, and an anchor into a document it
// knows must be one of that document's.
type LinkChecker struct {
	// Docs are the documents, by their slash-separated paths relative to
	// the repository's root. An anchor into a Markdown file that is not
	// here, or into any other file (a source file's #L10), is not
	// checked.
	Docs map[string]Document
	// Exists reports whether there is a file or a directory at the
	// slash-separated path relative to the repository's root.
	Exists func(path string) bool
}

// Links checks every link and image of the document Docs[name] whose
// target is not an absolute URL (http:, https:, mailto:): its path,
// resolved from the document's directory (from the repository's root if
// it starts with "/"), must exist, and its anchor, #x alone or after a
// path, must be one of the target document's. It returns how many links
// it checked and what it found.
func (c *LinkChecker) Links(name string) (checked int, problems []Problem) {
	for _, l := range c.Docs[name].Links {
		if absoluteURL(l.Target) {
			continue
		}
		checked++
		if msg := c.checkLink(name, l.Target); msg != "" {
			problems = append(problems, Problem{Line: l.Line, Msg: fmt.Sprintf("link %q: %s", l.Target, msg)})
		}
	}
	return checked, problems
}

// absoluteURL reports whether target is a URL the check leaves alone.
func absoluteURL(target string) bool {
	t := strings.ToLower(target)
	return strings.HasPrefix(t, "http:") || strings.HasPrefix(t, "https:") || strings.HasPrefix(t, "mailto:")
}

// checkLink says what is wrong with the link target of the document at
// from, or "".
func (c *LinkChecker) checkLink(from, target string) string {
	to, anchor, err := resolve(from, target)
	if err != nil {
		return err.Error()
	}
	if to != from && !c.Exists(to) {
		return fmt.Sprintf("%s does not exist", to)
	}
	if anchor == "" {
		return ""
	}
	doc, ok := c.Docs[to]
	if !ok || doc.HasAnchor(anchor) {
		return ""
	}
	msg := fmt.Sprintf("%s has no heading or anchor #%s", to, anchor)
	if near := doc.nearestAnchor(anchor); near != "" {
		msg += fmt.Sprintf(" (did you mean #%s?)", near)
	}
	return msg
}

// resolve is where the link target of the document at from points: the
// slash-separated path relative to the repository's root (from itself
// for an anchor alone) and the anchor, percent-decoded, "" if none. A
// query (?raw=true) is no part of the path.
func resolve(from, target string) (to, anchor string, err error) {
	ref, frag, _ := strings.Cut(target, "#")
	ref, _, _ = strings.Cut(ref, "?")
	if anchor, err = url.PathUnescape(frag); err != nil {
		return "", "", fmt.Errorf("bad anchor: %v", err)
	}
	if ref == "" {
		return from, anchor, nil
	}
	p, err := url.PathUnescape(ref)
	if err != nil {
		return "", "", fmt.Errorf("bad path: %v", err)
	}
	if strings.HasPrefix(p, "/") {
		to = path.Clean(strings.TrimPrefix(p, "/"))
	} else {
		to = path.Join(path.Dir(from), p)
	}
	if to == ".." || strings.HasPrefix(to, "../") {
		return "", "", fmt.Errorf("%s is outside the repository", to)
	}
	return to, anchor, nil
}

// nearestAnchor is, for a message, the anchor of d closest to id by
// edit distance, if one is close enough to be a likely meaning.
func (d Document) nearestAnchor(id string) string {
	best, bestDist := "", len(id)/3+2
	for _, h := range d.Headings {
		if dist := editDistance(id, h.Slug); dist < bestDist {
			best, bestDist = h.Slug, dist
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
