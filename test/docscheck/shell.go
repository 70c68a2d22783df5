package docscheck

import (
	"regexp"
	"strings"
)

// Commands splits a shell command line into its simple commands: at
// `&&`, `||`, `|`, `;`, `&` and subshell parentheses, and out of every
// command substitution (`$(…)` or backquotes), whose commands come first.
// Each command is its words with the quotes removed, the redirections
// (and heredoc delimiters) left out, and the variable assignments and
// shell keywords before the command name (FOO=bar, do, then, sudo, …)
// dropped. A word that held a command substitution reads "$(…)". It is
// not a shell: it reads what documentation writes, well enough to find
// the program and its arguments.
func Commands(line string) [][]string {
	var out [][]string
	splitList(line, &out)
	return out
}

// placeholder matches a `<name>` placeholder, which a shell would read
// as two redirections.
var placeholder = regexp.MustCompile(`^<[A-Za-z][^<>\s]*>`)

// assignment matches a variable assignment before a command name.
var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// prefixWords are words that may come before the command they run.
var prefixWords = map[string]bool{
	"do": true, "then": true, "else": true, "elif": true, "if": true, "while": true, "until": true,
	"!": true, "{": true, "time": true, "exec": true, "sudo": true, "env": true, "command": true, "nohup": true,
}

// splitList appends the simple commands of s to out.
func splitList(s string, out *[][]string) {
	var (
		words    []string
		word     strings.Builder
		inWord   bool
		dropNext bool // the next word is a redirection's target
	)
	endWord := func() {
		if !inWord {
			return
		}
		if dropNext {
			dropNext = false
		} else {
			words = append(words, word.String())
		}
		word.Reset()
		inWord = false
	}
	endCommand := func() {
		endWord()
		if w := commandWords(words); len(w) > 0 {
			*out = append(*out, w)
		}
		words = nil
		dropNext = false
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			endWord()
			i++
		case c == '\'':
			inWord = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				word.WriteString(s[i+1:])
				i = len(s)
				break
			}
			word.WriteString(s[i+1 : i+1+j])
			i += j + 2
		case c == '"':
			inWord = true
			i = readDoubleQuoted(s, i+1, &word, out)
		case c == '\\':
			if i+1 < len(s) {
				inWord = true
				word.WriteByte(s[i+1])
			}
			i += 2
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			inner, end := substitution(s, i+2)
			splitList(inner, out)
			inWord = true
			word.WriteString("$(…)")
			i = end
		case c == '`':
			inWord = true
			j := strings.IndexByte(s[i+1:], '`')
			if j < 0 {
				j = len(s) - i - 1
			}
			splitList(s[i+1:i+1+j], out)
			word.WriteString("$(…)")
			i += j + 2
		case c == '#' && !inWord:
			i = len(s) // a comment
		case c == '<' && placeholder.MatchString(s[i:]):
			m := placeholder.FindString(s[i:])
			inWord = true
			word.WriteString(m)
			i += len(m)
		case c == '<' || c == '>' || (c == '&' && i+1 < len(s) && s[i+1] == '>'):
			if inWord && strings.Trim(word.String(), "0123456789") == "" {
				word.Reset() // a file descriptor: 2>&1
				inWord = false
			} else {
				endWord()
			}
			i = skipRedirection(s, i)
			dropNext = true
		case c == '&' || c == '|' || c == ';' || ((c == '(' || c == ')') && !inWord):
			endCommand()
			i++
		default:
			inWord = true
			word.WriteByte(c)
			i++
		}
	}
	endCommand()
}

// skipRedirection returns the index after the redirection operator at
// s[i]: >, >>, <, <<, <<-, <<<, >&, <&, >|, &>, &>>.
func skipRedirection(s string, i int) int {
	if s[i] == '&' {
		i++
	}
	start := i
	for i < len(s) && (s[i] == '<' || s[i] == '>') {
		i++
	}
	if i < len(s) && (s[i] == '&' || s[i] == '|') {
		i++
	}
	if s[start:i] == "<<" && i < len(s) && s[i] == '-' {
		i++
	}
	return i
}

// readDoubleQuoted writes the double-quoted string that starts at s[i]
// (after its opening quote) to word, splitting out the commands of its
// substitutions, and returns the index after its closing quote.
func readDoubleQuoted(s string, i int, word *strings.Builder, out *[][]string) int {
	for i < len(s) {
		switch c := s[i]; {
		case c == '"':
			return i + 1
		case c == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0:
			word.WriteByte(s[i+1])
			i += 2
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			inner, end := substitution(s, i+2)
			splitList(inner, out)
			word.WriteString("$(…)")
			i = end
		default:
			word.WriteByte(c)
			i++
		}
	}
	return i
}

// substitution returns the text of the command substitution whose
// content starts at s[i] (after its "$(") and the index after its closing
// parenthesis, past nested parentheses and quotes.
func substitution(s string, i int) (string, int) {
	start, depth := i, 1
	for i < len(s) {
		switch s[i] {
		case '\'':
			if j := strings.IndexByte(s[i+1:], '\''); j >= 0 {
				i += j + 1
			}
		case '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		case '\\':
			i++
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return s[start:i], i + 1
			}
		}
		i++
	}
	return s[start:], len(s)
}

// commandWords drops the assignments and keywords before the command
// name of words.
func commandWords(words []string) []string {
	for len(words) > 0 && (assignment.MatchString(words[0]) || prefixWords[words[0]]) {
		words = words[1:]
	}
	return words
}

// Runs reports whether a command, its words, runs the program name: the
// bare name, or a path to it in a bin directory (bin/stackyard,
// /usr/local/bin/stackyard). Other paths ending in the name are not
// commands (deploy/helm/stackyard is the chart).
func Runs(words []string, name string) bool {
	if len(words) == 0 {
		return false
	}
	w := words[0]
	return w == name || w == "bin/"+name || strings.HasSuffix(w, "/bin/"+name)
}

// IsPlaceholder reports whether the word w stands for something the
// reader fills in or that was elided: `<name>`, `[STAGE]`, `…`, `...`.
func IsPlaceholder(w string) bool {
	return strings.Contains(w, "…") || strings.Contains(w, "...") ||
		(strings.HasPrefix(w, "<") && strings.HasSuffix(w, ">")) ||
		(strings.HasPrefix(w, "[") && strings.HasSuffix(w, "]"))
}
