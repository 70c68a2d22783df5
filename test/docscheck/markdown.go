package docscheck

import (
	"regexp"
	"strings"
)

// Snippet is one piece of a document that may hold a command line or a
// field path: a logical line of a shell code block (continuation lines
// joined) or the content of an inline code span.
type Snippet struct {
	// Line is the 1-based line the snippet starts on.
	Line int
	// Text is the command line or the span's content, newlines made
	// spaces.
	Text string
	// Code is true for a line of a fenced code block, false for an inline
	// code span.
	Code bool
}

// Heading is one ATX heading of a document.
type Heading struct {
	// Line is the heading's 1-based line.
	Line int
	// Level is the number of its #s, 1 to 6.
	Level int
	// Text is the heading as written, without the #s around it.
	Text string
	// Slug is its anchor, as GitHub makes it: the Slug of the text it
	// shows, with "-1", "-2"… after it when an earlier heading of the
	// document has the same.
	Slug string
}

// Link is one inline link or image of a document.
type Link struct {
	// Line is the 1-based line the link starts on.
	Line int
	// Target is where it points, as written, without a title: a URL, a
	// path, a path and an anchor (path#anchor) or an anchor (#anchor).
	Target string
	// Image is true for an image, ![alt](target).
	Image bool
}

// Document is what Parse finds in one Markdown file.
type Document struct {
	// Commands are the logical command lines of the fenced shell code
	// blocks (```sh, ```bash, ```console, ```shell and unlabelled ones),
	// with their prompts removed and heredoc bodies left out.
	Commands []Snippet
	// Spans are the inline code spans outside the fenced code blocks.
	Spans []Snippet
	// Headings are the ATX headings (# to ######) outside the fenced code
	// blocks, in order, each with its anchor.
	Headings []Heading
	// Anchors are the ids of the explicit HTML anchors of the prose,
	// <a id="x"> and <a name="x">, in order.
	Anchors []string
	// Links are the inline links [text](target) and images
	// ![alt](target) of the prose, in order.
	Links []Link
	// Contents are the links of the document's contents list, or nil if
	// it has none: the first bullet list before the first level-2 heading
	// each of whose items holds links, and only links to anchors of the
	// document itself (#…).
	Contents []Link
}

// shellLanguages are the info strings of the fenced code blocks whose
// lines are read as shell command lines. A block without an info string
// is read as one too: the docs leave many command blocks unlabelled.
var shellLanguages = map[string]bool{"": true, "sh": true, "bash": true, "shell": true, "console": true}

// fence matches the opening or closing line of a fenced code block: its
// fence and its info string.
var fence = regexp.MustCompile("^\\s*(`{3,}|~{3,})\\s*([^`\\s]*)")

// heredoc matches a heredoc redirection (not a here-string, <<<) and
// captures its delimiter.
var heredoc = regexp.MustCompile(`(?:^|[^<])<<-?\s*(?:'([^']+)'|"([^"]+)"|\\?([A-Za-z_][A-Za-z0-9_]*))`)

// Parse reads the Markdown text src: the commands of its code blocks, and
// in its prose (outside code blocks and code spans) its code spans,
// headings, anchors, links and contents list.
func Parse(src string) Document {
	var doc Document
	lines := strings.Split(src, "\n")
	var prose []int // indexes of the lines outside fenced code blocks
	for i := 0; i < len(lines); i++ {
		m := fence.FindStringSubmatch(lines[i])
		if m == nil {
			prose = append(prose, i)
			continue
		}
		marker, lang := m[1], strings.ToLower(m[2])
		end := len(lines)
		for j := i + 1; j < len(lines); j++ {
			if c := fence.FindStringSubmatch(lines[j]); c != nil && c[1][0] == marker[0] && len(c[1]) >= len(marker) && c[2] == "" {
				end = j
				break
			}
		}
		if shellLanguages[lang] {
			doc.Commands = append(doc.Commands, commandLines(lines[i+1:end], i+2, lang == "console")...)
		}
		i = end
	}
	for _, para := range paragraphs(lines, prose) {
		in := parseInline(lines, para)
		doc.Spans = append(doc.Spans, in.spans...)
		doc.Links = append(doc.Links, in.links...)
		doc.Anchors = append(doc.Anchors, in.anchors...)
		if len(para) == 1 {
			if h, ok := in.heading(); ok {
				doc.Headings = append(doc.Headings, h)
			}
		}
	}
	doc.Headings = uniqueSlugs(doc.Headings)
	doc.Contents = contentsList(lines, prose, doc.Headings, doc.Links)
	return doc
}

// commandLines are the logical command lines of a shell code block whose
// first line is line first of the document. In a console block only the
// lines after a "$ " prompt are commands; the rest is their output.
func commandLines(lines []string, first int, console bool) []Snippet {
	var out []Snippet
	for i := 0; i < len(lines); i++ {
		text := strings.TrimSpace(lines[i])
		prompted := strings.HasPrefix(text, "$ ") || text == "$"
		if console && !prompted {
			continue
		}
		if prompted {
			text = strings.TrimSpace(strings.TrimPrefix(text, "$"))
		}
		start := i
		for strings.HasSuffix(text, "\\") && i+1 < len(lines) {
			i++
			text = strings.TrimSpace(strings.TrimSuffix(text, "\\")) + " " + strings.TrimSpace(lines[i])
		}
		if text == "" {
			continue
		}
		out = append(out, Snippet{Line: first + start, Text: text, Code: true})
		// A heredoc's body is input, not commands: skip to its delimiter.
		if m := heredoc.FindStringSubmatch(text); m != nil && !strings.HasPrefix(text, "#") {
			delim := m[1] + m[2] + m[3]
			for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != delim {
				i++
			}
			i++
		}
	}
	return out
}

// paragraphs splits the lines at the indexes prose into the runs inline
// markup may cross: a code span or a link does not cross a blank line, a
// heading or a table row, as in CommonMark, where they end the paragraph.
// Each run is a list of line indexes.
func paragraphs(lines []string, prose []int) [][]int {
	var out [][]int
	var para []int
	flush := func() {
		if len(para) > 0 {
			out = append(out, para)
			para = nil
		}
	}
	for n, i := range prose {
		if n > 0 && prose[n-1] != i-1 {
			flush() // a code block came between
		}
		trimmed := strings.TrimSpace(lines[i])
		switch {
		case trimmed == "":
			flush()
		case strings.HasPrefix(trimmed, "#") || strings.HasPrefix(trimmed, "|"):
			flush()
			para = append(para, i)
			flush()
		default:
			para = append(para, i)
		}
	}
	flush()
	return out
}

// inline is what one paragraph holds.
type inline struct {
	// text is the paragraph's lines, each ended by "\n".
	text string
	// masked is text with every byte of its code spans but newlines,
	// backticks included, made an 'x': what is left is the markup that
	// is not code.
	masked string
	// lineOf is the 1-based document line of each byte of text.
	lineOf []int
	// codes are where the code spans are, in text.
	codes []codeSpan
	// spans are the code spans, links the links and images, and anchors
	// the ids of the explicit anchors.
	spans   []Snippet
	links   []Link
	anchors []string
	// syntax is where each of links is written in text.
	syntax []linkSyntax
}

// codeSpan is where a code span is: text[start:end], its backticks
// included.
type codeSpan struct{ start, end int }

// linkSyntax is where a link is written: text[start:end], from its "["
// (an image's "!") to its ")", and its text, text[textStart:textEnd].
type linkSyntax struct{ start, textStart, textEnd, end int }

// anchorTag matches an explicit HTML anchor and captures its id.
var anchorTag = regexp.MustCompile(`(?i)<a\s[^>]*?\b(?:id|name)\s*=\s*["']([^"']*)["']`)

// parseInline reads the inline markup of one paragraph, the lines at the
// indexes para.
func parseInline(lines []string, para []int) inline {
	var text strings.Builder
	var in inline
	for _, i := range para {
		for range len(lines[i]) + 1 {
			in.lineOf = append(in.lineOf, i+1)
		}
		text.WriteString(lines[i])
		text.WriteByte('\n')
	}
	in.text = text.String()
	in.codeSpans()
	masked := []byte(in.text)
	for _, c := range in.codes {
		for i := c.start; i < c.end; i++ {
			if masked[i] != '\n' {
				masked[i] = 'x'
			}
		}
	}
	in.masked = string(masked)
	in.findLinks(0, len(in.masked))
	for _, m := range anchorTag.FindAllStringSubmatch(in.masked, -1) {
		in.anchors = append(in.anchors, m[1])
	}
	return in
}

// codeSpans finds the code spans of the paragraph.
func (in *inline) codeSpans() {
	s := in.text
	for i := 0; i < len(s); {
		switch {
		case s[i] == '\\' && i+1 < len(s):
			i += 2 // an escaped backtick opens nothing
			continue
		case s[i] != '`':
			i++
			continue
		}
		n := backticks(s, i)
		closing := -1
		for j := i + n; j < len(s); {
			if s[j] != '`' {
				j++
				continue
			}
			m := backticks(s, j)
			if m == n {
				closing = j
				break
			}
			j += m
		}
		if closing < 0 {
			i += n // no closing run: the backticks are literal
			continue
		}
		content := strings.ReplaceAll(s[i+n:closing], "\n", " ")
		if len(content) > 2 && content[0] == ' ' && content[len(content)-1] == ' ' && strings.TrimSpace(content) != "" {
			content = content[1 : len(content)-1]
		}
		in.spans = append(in.spans, Snippet{Line: in.lineOf[i], Text: content})
		in.codes = append(in.codes, codeSpan{start: i, end: closing + n})
		i = closing + n
	}
}

// backticks is the length of the run of backticks at s[i].
func backticks(s string, i int) int {
	n := 0
	for i+n < len(s) && s[i+n] == '`' {
		n++
	}
	return n
}

// findLinks finds the inline links and images of masked[from:to], so
// none inside a code span: a "[text]" right followed by "(target)" or
// "(target "title")". An image inside a link's text, as a badge is
// written, is found too.
//
// Not covered: reference links ([text][ref], [ref] with a [ref]: target
// definition; the docs use none), autolinks (<https://…>) and bare URLs,
// which are absolute, and the links of raw HTML (<a href>, <img src>).
// A link inside an HTML comment is read as if it showed.
func (in *inline) findLinks(from, to int) {
	m := in.masked
	for i := from; i < to; i++ {
		switch {
		case m[i] == '\\':
			i++ // an escaped bracket opens nothing
			continue
		case m[i] != '[':
			continue
		}
		closing := matchBracket(m, i, to)
		if closing < 0 || closing+1 >= to || m[closing+1] != '(' {
			continue
		}
		target, end, ok := destination(in.text, closing+2, to)
		if !ok {
			continue
		}
		start := i
		image := i > from && m[i-1] == '!' && (i < 2 || m[i-2] != '\\')
		if image {
			start = i - 1
		}
		in.links = append(in.links, Link{Line: in.lineOf[start], Target: target, Image: image})
		in.syntax = append(in.syntax, linkSyntax{start: start, textStart: i + 1, textEnd: closing, end: end})
		in.findLinks(i+1, closing)
		i = end - 1
	}
}

// matchBracket is the index of the "]" that closes the "[" at s[open],
// before to, or -1.
func matchBracket(s string, open, to int) int {
	depth := 0
	for i := open; i < to; i++ {
		switch s[i] {
		case '\\':
			i++
		case '[':
			depth++
		case ']':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// destination reads a link's "target)" or "target "title")" at s[i:to],
// after its "(": the target, without angle brackets, and the index after
// the ")". It is false if there is none.
func destination(s string, i, to int) (target string, end int, ok bool) {
	skipSpace := func() {
		for i < to && strings.IndexByte(" \t\n", s[i]) >= 0 {
			i++
		}
	}
	skipSpace()
	start := i
	if i < to && s[i] == '<' {
		close := strings.IndexAny(s[i:to], ">\n")
		if close < 0 || s[i+close] != '>' {
			return "", 0, false
		}
		target, i = s[i+1:i+close], i+close+1
	} else {
		depth := 0
	dest:
		for ; i < to; i++ {
			switch s[i] {
			case '\\':
				i++
			case ' ', '\t', '\n':
				break dest
			case '(':
				depth++
			case ')':
				if depth == 0 {
					break dest
				}
				depth--
			}
		}
		target = s[start:min(i, to)]
	}
	skipSpace()
	if i < to && strings.IndexByte(`"'(`, s[i]) >= 0 {
		closer := map[byte]byte{'"': '"', '\'': '\'', '(': ')'}[s[i]]
		close := strings.IndexByte(s[i+1:to], closer)
		if close < 0 {
			return "", 0, false
		}
		i += close + 2
		skipSpace()
	}
	if i >= to || s[i] != ')' {
		return "", 0, false
	}
	return target, i + 1, true
}

// atxHeading matches an ATX heading line, capturing its #s and its text
// with any closing #s.
var atxHeading = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$`)

// heading reads the paragraph, one line, as an ATX heading. Its Slug is
// not yet made unique in the document.
func (in *inline) heading() (Heading, bool) {
	line := strings.TrimSuffix(in.text, "\n")
	m := atxHeading.FindStringSubmatchIndex(line)
	if m == nil {
		return Heading{}, false
	}
	start, end := m[4], m[5]
	if start < 0 {
		start, end = m[3], m[3]
	}
	// A closing sequence of #s, after a space, is no part of the text.
	if rest := strings.TrimRight(line[start:end], "#"); rest == "" {
		end = start
	} else if len(rest) < end-start && strings.ContainsAny(rest[len(rest)-1:], " \t") {
		end = start + len(strings.TrimRight(rest, " \t"))
	}
	return Heading{
		Line:  in.lineOf[0],
		Level: m[3] - m[2],
		Text:  line[start:end],
		Slug:  Slug(in.render(start, end)),
	}, true
}

// render is the text the markup of text[start:end] shows, from which
// GitHub makes a heading's anchor: a code span's content without its
// backticks, a link's text without its target, no image, no HTML tag
// and no backslash of an escape.
func (in *inline) render(start, end int) string {
	var b strings.Builder
	inCode := func(i int) bool {
		for _, c := range in.codes {
			if i >= c.start && i < c.end {
				return true
			}
		}
		return false
	}
	for i := start; i < end; i++ {
		if inCode(i) {
			if in.text[i] != '`' {
				b.WriteByte(in.text[i])
			}
			continue
		}
		skip := false
		for n, s := range in.syntax {
			switch {
			case in.links[n].Image && i >= s.start && i < s.end:
				skip = true
			case (i >= s.start && i < s.textStart) || (i >= s.textEnd && i < s.end):
				skip = true
			}
		}
		if skip {
			continue
		}
		switch c := in.text[i]; {
		case c == '<':
			if tag := htmlTag.FindString(in.text[i:end]); tag != "" {
				i += len(tag) - 1
				continue
			}
		case c == '\\' && i+1 < end && strings.IndexByte(asciiPunct, in.text[i+1]) >= 0:
			i++
		}
		b.WriteByte(in.text[i])
	}
	return b.String()
}

// htmlTag matches an HTML tag at the start of a string.
var htmlTag = regexp.MustCompile(`^</?[A-Za-z][^<>]*>`)

// asciiPunct are the characters a backslash escapes.
const asciiPunct = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
