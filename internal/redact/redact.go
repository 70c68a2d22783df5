// Package redact removes secret values from text that leaves stackyard's
// code: error messages, status messages, events and log lines. The agent,
// its authorizer and the Update controller each hold secrets in clear text
// (config values, outputs, bearer tokens) and pass whatever text they did
// not write themselves (from the Pulumi CLI, a program, client-go) through
// a Set before it goes anywhere.
package redact

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Placeholder is what a secret value is replaced with.
const Placeholder = "[secret]"

// Set is a set of secret values to remove from text. The zero value and a
// nil *Set hold none; a Set may be used from several goroutines at once.
type Set struct {
	mu     sync.Mutex
	values []string
	// replacer replaces every value, longest first, so that a secret that
	// contains another is replaced whole; nil while values is empty.
	replacer *strings.Replacer
}

// New returns a Set holding values.
func New(values ...string) *Set {
	s := &Set{}
	s.Add(values...)
	return s
}

// Add remembers further secret values. Empty strings are ignored: they
// reveal nothing and would match everywhere.
func (s *Set) Add(values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.values)
	s.values = append(s.values, values...)
	s.values = slices.DeleteFunc(s.values, func(v string) bool { return v == "" })
	slices.SortFunc(s.values, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b))
	})
	s.values = slices.Compact(s.values)
	if len(s.values) == n {
		return
	}
	pairs := make([]string, 0, 2*len(s.values))
	for _, v := range s.values {
		pairs = append(pairs, v, Placeholder)
	}
	s.replacer = strings.NewReplacer(pairs...)
}

// Redact returns text with every secret value of the Set replaced by
// Placeholder, in one pass: a placeholder already written is never
// matched again.
func (s *Set) Redact(text string) string {
	if s == nil {
		return text
	}
	s.mu.Lock()
	r := s.replacer
	s.mu.Unlock()
	if r == nil {
		return text
	}
	return r.Replace(text)
}

// MinLeaf is the length below which AddJSON leaves out a string or number
// inside a document: removing every "1" or "id" would make messages
// unreadable while hiding nothing guessable.
const MinLeaf = 3

// AddJSON remembers a secret JSON document: its text, and each string and
// number inside it of at least MinLeaf characters, so that a part of a
// secret object is removed too where it appears alone. A doc that is not
// JSON is remembered as text only.
func (s *Set) AddJSON(doc string) {
	values := []string{doc}
	var v any
	if json.Unmarshal([]byte(doc), &v) == nil {
		values = appendLeaves(values, v)
	}
	s.Add(values...)
}

// appendLeaves appends the strings and numbers inside v, a decoded JSON
// value, that are at least MinLeaf characters long.
func appendLeaves(out []string, v any) []string {
	switch t := v.(type) {
	case map[string]any:
		for _, c := range t {
			out = appendLeaves(out, c)
		}
	case []any:
		for _, c := range t {
			out = appendLeaves(out, c)
		}
	case string:
		if len(t) >= MinLeaf {
			out = append(out, t)
		}
	case float64:
		if n := strconv.FormatFloat(t, 'f', -1, 64); len(n) >= MinLeaf {
			out = append(out, n)
		}
	}
	return out
}

// RedactDecoded redacts, in place, every string inside v, a value decoded
// from JSON into map[string]any and []any (an engine event); keys are
// left as they are.
func (s *Set) RedactDecoded(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			if str, ok := c.(string); ok {
				t[k] = s.Redact(str)
			} else {
				s.RedactDecoded(c)
			}
		}
	case []any:
		for i, c := range t {
			if str, ok := c.(string); ok {
				t[i] = s.Redact(str)
			} else {
				s.RedactDecoded(c)
			}
		}
	}
}
