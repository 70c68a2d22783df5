// Package samebuild tells whether two Go executables come from one build,
// by what the Go toolchain records in them (debug/buildinfo). stackyard
// runs its lean agent (cmd/stackyard-agent) in place of its own `agent
// serve` only when it is: an agent left from another build must not serve
// a newer operator, in the local runtime or in a workspace pod.
package samebuild

import (
	"debug/buildinfo"
	"fmt"
	"strings"
)

// Check returns nil when the executables at a and b were built from the
// same source by the same toolchain with the same linker flags, and
// otherwise an error that says how b differs from a.
func Check(a, b string) error {
	ba, err := buildinfo.ReadFile(a)
	if err != nil {
		return fmt.Errorf("no build information in %s: %w", a, err)
	}
	bb, err := buildinfo.ReadFile(b)
	if err != nil {
		return fmt.Errorf("no build information in %s: %w", b, err)
	}
	if da, db := describe(ba), describe(bb); da != db {
		return fmt.Errorf("another build (%s) than %s's (%s)", db, a, da)
	}
	return nil
}

// describe names what a binary was built from: the Go version, the module
// version, the commit with whether the tree was modified, and the linker
// flags (which carry the version and commit stamped by `make images`, and
// tell builds apart where no VCS information was recorded).
func describe(bi *buildinfo.BuildInfo) string {
	s := map[string]string{}
	for _, kv := range bi.Settings {
		s[kv.Key] = kv.Value
	}
	parts := []string{bi.GoVersion, bi.Main.Version, s["vcs.revision"], s["vcs.modified"]}
	if f := s["-ldflags"]; f != "" {
		parts = append(parts, "ldflags "+f)
	}
	return strings.Join(parts, " ")
}
