package server

import (
	"testing"
)

// FuzzParseLocks feeds arbitrary CLI output to the lock parser, which must
// never panic and must only return locks with a pid it could parse.
func FuzzParseLocks(f *testing.F) {
	f.Add(lockedMessage)
	f.Add("  x: created by a@b (pid 1) at 2026-01-01T00:00:00Z")
	f.Add("  file:///nonexistent?x=y: created by @ (pid -1) at bogus")
	f.Fuzz(func(t *testing.T, text string) {
		for _, l := range parseLocks(text) {
			if l.url == "" {
				t.Errorf("lock without url from %q", text)
			}
		}
	})
}

// FuzzConfigKey feeds arbitrary keys and JSON to the config key parser and
// the secret-leaf splitter; neither may panic, and every leaf they produce
// must parse back as a path key.
func FuzzConfigKey(f *testing.F) {
	f.Add("p:db", false, `{"a":[1,{"b":"c"}]}`)
	f.Add("p:db.hosts[0]", true, `["x"]`)
	f.Add(`p:["we.ird"]`, true, `{"q\"uote":"v"}`)
	f.Fuzz(func(t *testing.T, key string, path bool, doc string) {
		if _, _, err := configKey(key, path); err != nil {
			return
		}
		leaves, err := secretLeaves(configEntry{key: key, path: path, secret: true, value: doc})
		if err != nil {
			return
		}
		for _, l := range leaves {
			if _, _, err := configKey(l.key, true); err != nil {
				t.Errorf("leaf key %q of %q does not parse: %v", l.key, key, err)
			}
		}
	})
}
