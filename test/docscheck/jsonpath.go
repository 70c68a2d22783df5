package docscheck

import (
	"fmt"
	"strings"
)

// JSONPathFields returns the field paths a kubectl JSONPath template
// (`-o jsonpath=…`, `--for=jsonpath=…`) reads, each from the object's
// root, as ParsePath segments. Inside `{range X}…{end}` a path is taken
// relative to X's items, as kubectl does. The items of a list
// (`.items[*]`) are dropped, so that a path reads from one object.
// Literals, `@` and recursive descent (`..name`) name no field.
func JSONPathFields(tmpl string) ([][]string, error) {
	if !strings.Contains(tmpl, "{") {
		tmpl = "{" + tmpl + "}"
	}
	var (
		out   [][]string
		scope [][]string // the enclosing ranges' paths
	)
	for i := 0; i < len(tmpl); i++ {
		if tmpl[i] != '{' {
			continue
		}
		end := closingBrace(tmpl, i+1)
		if end < 0 {
			return nil, fmt.Errorf("unclosed { in %q", tmpl)
		}
		expr := strings.TrimSpace(tmpl[i+1 : end])
		i = end
		rangeOf, isRange := strings.CutPrefix(expr, "range ")
		switch {
		case expr == "end":
			if len(scope) == 0 {
				return nil, fmt.Errorf("{end} without {range} in %q", tmpl)
			}
			scope = scope[:len(scope)-1]
			continue
		case isRange:
			expr = strings.TrimSpace(rangeOf)
		}
		segs, ok, err := expressionPath(expr)
		if err != nil {
			return nil, fmt.Errorf("%w in %q", err, tmpl)
		}
		var full []string
		if len(scope) > 0 && ok {
			full = append(append(full, scope[len(scope)-1]...), segs...)
		} else {
			full = segs
		}
		if isRange {
			scope = append(scope, full)
		}
		if p := dropItems(full); ok && len(p) > 0 {
			out = append(out, p)
		}
	}
	return out, nil
}

// CustomColumnsFields returns the field paths of a kubectl
// `-o custom-columns=NAME:PATH,…` specification, as JSONPathFields does.
func CustomColumnsFields(spec string) ([][]string, error) {
	var out [][]string
	for _, col := range strings.Split(spec, ",") {
		_, expr, ok := strings.Cut(col, ":")
		if !ok {
			return nil, fmt.Errorf("column %q has no path", col)
		}
		paths, err := JSONPathFields(expr)
		if err != nil {
			return nil, err
		}
		out = append(out, paths...)
	}
	return out, nil
}

// closingBrace is the index of the "}" that closes the expression
// starting at tmpl[i], past quoted strings, or -1.
func closingBrace(tmpl string, i int) int {
	for ; i < len(tmpl); i++ {
		switch tmpl[i] {
		case '"', '\'':
			q := tmpl[i]
			for i++; i < len(tmpl) && tmpl[i] != q; i++ {
				if tmpl[i] == '\\' {
					i++
				}
			}
		case '}':
			return i
		}
	}
	return -1
}

// expressionPath turns one JSONPath expression into ParsePath segments.
// ok is false for an expression that names no field: a literal, "@" or a
// recursive descent.
func expressionPath(expr string) (segs []string, ok bool, err error) {
	if expr == "" || expr == "@" || expr[0] == '"' || expr[0] == '\'' || strings.Contains(expr, "..") {
		return nil, false, nil
	}
	expr = strings.TrimLeft(expr, "$@")
	for i := 0; i < len(expr); {
		switch expr[i] {
		case '.':
			j := i + 1
			for j < len(expr) && expr[j] != '.' && expr[j] != '[' {
				j++
			}
			if j == i+1 {
				return nil, false, fmt.Errorf("empty segment")
			}
			segs = append(segs, expr[i+1:j])
			i = j
		case '[':
			depth, j := 0, i
			for ; j < len(expr); j++ {
				if expr[j] == '[' {
					depth++
				} else if expr[j] == ']' {
					depth--
					if depth == 0 {
						break
					}
				}
			}
			if j == len(expr) {
				return nil, false, fmt.Errorf("unclosed [")
			}
			inner := expr[i+1 : j]
			if len(inner) >= 2 && (inner[0] == '\'' || inner[0] == '"') && inner[len(inner)-1] == inner[0] {
				segs = append(segs, inner[1:len(inner)-1]) // a key: ['pulumi.com/x']
			} else {
				segs = append(segs, "[]")
			}
			i = j + 1
		default:
			if i == 0 {
				// kubectl reads "status.x" as ".status.x"
				expr = "." + expr
				continue
			}
			return nil, false, fmt.Errorf("unexpected %q", expr[i:])
		}
	}
	return segs, true, nil
}

// dropItems removes the leading "items", "[]" of a path read from a list.
func dropItems(p []string) []string {
	if len(p) >= 2 && p[0] == "items" && p[1] == "[]" {
		return p[2:]
	}
	return p
}
