// Package readset is the one shape in which the versions of the Secrets and
// ConfigMaps an agent runs with cross the boundary between the operator
// and the agent.
//
// An agent reads its environment once, when it starts; the values of the
// Secrets and ConfigMaps it names are then fixed for the agent's life. The
// runtime that starts it records which versions it built the environment
// from and hands them to the agent in EnvVar. The operator's choke point
// (change.Authorize), when it has checked that what a governed Stack reads
// is what a promotion previewed, sends the versions it checked with the
// operation, in the gRPC metadata under Header. The agent runs the
// operation only when every object it holds is at the version the choke
// point checked (Mismatch), and refuses otherwise: a Secret written between
// the check and the agent's read is never used unseen.
package readset

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

const (
	// EnvVar is the agent's environment variable that lists the versions
	// its environment was built from, as Encode writes them.
	EnvVar = "STACKYARD_READ_SET"
	// Header is the gRPC metadata key under which the operator sends the
	// versions its choke point checked, as Encode writes them.
	Header = "stackyard-checked-reads"
)

// Set maps an object, "Secret/<name>" or "ConfigMap/<name>" of the
// Workspace's namespace, to its resourceVersion: "" for one that did not
// exist when it was read.
type Set map[string]string

// Add records that the object of kind and name was read at version.
func (s Set) Add(kind, name, version string) { s[kind+"/"+name] = version }

// Encode writes s as "<Kind>/<name>=<version>" entries, sorted, joined by
// ";". Kubernetes names and resourceVersions contain neither ";" nor "=".
func (s Set) Encode() string {
	entries := make([]string, 0, len(s))
	for _, k := range slices.Sorted(maps.Keys(s)) {
		entries = append(entries, k+"="+s[k])
	}
	return strings.Join(entries, ";")
}

// Decode reads what Encode wrote. The empty string is the empty Set.
func Decode(text string) (Set, error) {
	s := Set{}
	if text == "" {
		return s, nil
	}
	for i, entry := range strings.Split(text, ";") {
		key, version, ok := strings.Cut(entry, "=")
		kind, name, _ := strings.Cut(key, "/")
		switch {
		case !ok:
			return nil, fmt.Errorf("entry %d (%q): want <Kind>/<name>=<resourceVersion>", i, entry)
		case kind != "Secret" && kind != "ConfigMap":
			return nil, fmt.Errorf("entry %d (%q): kind %q: want Secret or ConfigMap", i, entry, kind)
		case name == "" || strings.ContainsAny(name, "/= "):
			return nil, fmt.Errorf("entry %d (%q): %q is not an object name", i, entry, name)
		case strings.ContainsAny(version, "=/ "):
			return nil, fmt.Errorf("entry %d (%q): %q is not a resourceVersion", i, entry, version)
		}
		if _, dup := s[key]; dup {
			return nil, fmt.Errorf("entry %d (%q): %s is listed twice", i, entry, key)
		}
		s[key] = version
	}
	return s, nil
}

// Mismatch says which object an agent holds (held, from its EnvVar) at a
// version other than the one the choke point checked, or that the choke
// point did not check; "" when every object held was checked at the
// version held. An object the choke point checked and the agent does not
// hold is no mismatch: the agent does not read it.
func Mismatch(held, checked Set) string {
	for _, k := range slices.Sorted(maps.Keys(held)) {
		want, ok := checked[k]
		switch {
		case !ok:
			return fmt.Sprintf("the agent's environment was built from %s, which the operator did not check", k)
		case want != held[k]:
			return fmt.Sprintf("the agent's environment was built from %s at %s, and the operator checked %s",
				k, describe(held[k]), describe(want))
		}
	}
	return ""
}

// describe names a version for a message.
func describe(version string) string {
	if version == "" {
		return "no version (it did not exist)"
	}
	return "resourceVersion " + version
}
