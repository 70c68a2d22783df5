package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/stackyard/stackyard/internal/samebuild"
)

// LeanAgent is the file name of the lean agent binary (cmd/stackyard-agent)
// that New looks for beside the stackyard binary.
const LeanAgent = "stackyard-agent"

// leanAgentRefused says why the lean agent at lean may not stand in for
// `stackyard agent serve` of the binary at stackyard, or "" when it may.
// Every agent gets its Workspace's environment, Secrets' values among
// them, so the file must be as trusted as stackyard itself: owned by
// stackyard's owner or by root, writable by nobody else, in a directory
// nobody else may write to; and the same build, so that an agent left from
// an older build does not serve a newer operator.
func leanAgentRefused(stackyard, lean string) string {
	// The checks hold for the file that runs and its own directory, not
	// for a link to it.
	lean, err := filepath.EvalSymlinks(lean)
	if errors.Is(err, os.ErrNotExist) {
		return "not installed"
	}
	if err != nil {
		return err.Error()
	}
	fi, err := os.Stat(lean)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "not installed"
	case err != nil:
		return err.Error()
	case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
		return "not an executable file"
	}
	own, err := os.Stat(stackyard)
	if err != nil {
		return err.Error()
	}
	if why := unsafeFile(fi, own); why != "" {
		return why
	}
	dir, err := os.Stat(filepath.Dir(lean))
	if err != nil {
		return err.Error()
	}
	if why := unsafeFile(dir, own); why != "" {
		return "its directory: " + why
	}
	if err := samebuild.Check(stackyard, lean); err != nil {
		return err.Error()
	}
	return ""
}

// unsafeFile says why fi, a file or directory the lean agent depends on,
// is not as safe as the stackyard binary own, or "".
func unsafeFile(fi, own os.FileInfo) string {
	st, ok1 := fi.Sys().(*syscall.Stat_t)
	so, ok2 := own.Sys().(*syscall.Stat_t)
	switch {
	case !ok1 || !ok2:
		return "its owner is unknown"
	case st.Uid != so.Uid && st.Uid != 0:
		return fmt.Sprintf("owned by uid %d, not by stackyard's owner (%d) or root", st.Uid, so.Uid)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Sprintf("writable by others (mode %v)", fi.Mode().Perm())
	}
	return ""
}
