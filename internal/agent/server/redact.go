package server

import (
	"sort"
	"strings"
	"sync"
)

// redactedText replaces a secret value wherever the agent would otherwise
// echo it.
const redactedText = "[secret]"

// redactor remembers every secret value the agent has seen (secret config
// values, secret outputs) and removes them from text that leaves the agent:
// error messages, results and log lines. The CLI itself masks secrets in
// its events, but error text from the CLI or a program is not guaranteed
// to, so everything is passed through redact.
type redactor struct {
	mu     sync.Mutex
	values map[string]struct{}
	sorted []string // longest first, so a secret containing another is replaced whole
}

func newRedactor() *redactor {
	return &redactor{values: map[string]struct{}{}}
}

// add remembers secret values. Empty strings are ignored.
func (r *redactor) add(values ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	changed := false
	for _, v := range values {
		if v == "" {
			continue
		}
		if _, ok := r.values[v]; !ok {
			r.values[v] = struct{}{}
			changed = true
		}
	}
	if !changed {
		return
	}
	r.sorted = r.sorted[:0]
	for v := range r.values {
		r.sorted = append(r.sorted, v)
	}
	sort.Slice(r.sorted, func(i, j int) bool { return len(r.sorted[i]) > len(r.sorted[j]) })
}

// redact returns s with every remembered secret replaced.
func (r *redactor) redact(s string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.sorted {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, redactedText)
		}
	}
	return s
}
