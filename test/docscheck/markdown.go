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

// Document is what Parse finds in one Markdown file.
type Document struct {
	// Commands are the logical command lines of the fenced shell code
	// blocks (```sh, ```bash, ```console, ```shell and unlabelled ones),
	// with their prompts removed and heredoc bodies left out.
	Commands []Snippet
	// Spans are the inline code spans outside the fenced code blocks.
	Spans []Snippet
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

// Parse reads the Markdown text src.
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
	doc.Spans = inlineSpans(lines, prose)
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

// inlineSpans are the inline code spans of the lines at the indexes
// prose. A span does not cross a blank line, a heading or a table row,
// as in CommonMark, where they end the paragraph.
func inlineSpans(lines []string, prose []int) []Snippet {
	var out []Snippet
	var para []int
	flush := func() {
		out = append(out, paragraphSpans(lines, para)...)
		para = para[:0]
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

// paragraphSpans are the code spans of one paragraph, the lines at the
// indexes para.
func paragraphSpans(lines []string, para []int) []Snippet {
	if len(para) == 0 {
		return nil
	}
	var text strings.Builder
	lineOf := make([]int, 0, 256) // the document line of each byte of text
	for _, i := range para {
		for range len(lines[i]) + 1 {
			lineOf = append(lineOf, i+1)
		}
		text.WriteString(lines[i])
		text.WriteByte('\n')
	}
	s := text.String()
	var out []Snippet
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
		out = append(out, Snippet{Line: lineOf[i], Text: content})
		i = closing + n
	}
	return out
}

// backticks is the length of the run of backticks at s[i].
func backticks(s string, i int) int {
	n := 0
	for i+n < len(s) && s[i+n] == '`' {
		n++
	}
	return n
}
