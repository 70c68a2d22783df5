package source

import (
	"os"
	"path/filepath"
	"strings"
)

// cleanSubdir validates a user-given program directory (FieldDir) and
// returns it in clean, slash-separated relative form; "" and "." both mean
// the root. Absolute paths and any ".." element are refused outright, even
// ones that would clean back inside the tree, because they are never needed
// and only hide intent.
func cleanSubdir(dir string) (string, error) {
	if dir == "" || dir == "." {
		return ".", nil
	}
	if strings.HasPrefix(dir, "/") || strings.HasPrefix(dir, `\`) || filepath.IsAbs(dir) || filepath.VolumeName(dir) != "" {
		return "", newError(ReasonInvalidSpec, FieldDir, nil, "%q: must be a path relative to the source root", dir)
	}
	for _, part := range strings.FieldsFunc(dir, func(r rune) bool { return r == '/' || r == '\\' }) {
		if part == ".." {
			return "", newError(ReasonInvalidSpec, FieldDir, nil, "%q: must not contain \"..\"", dir)
		}
	}
	if strings.ContainsRune(dir, 0) {
		return "", newError(ReasonInvalidSpec, FieldDir, nil, "%q: contains a NUL byte", dir)
	}
	return filepath.ToSlash(filepath.Clean(dir)), nil
}

// projectFiles are the names Pulumi accepts for a project file.
var projectFiles = []string{"Pulumi.yaml", "Pulumi.yml"}

// checkProgramDir verifies that sub (from cleanSubdir) is a directory of the
// tree at root, that it stays inside the tree once symlinks are followed,
// and that it holds a Pulumi project file. where describes the tree in
// messages, e.g. "commit 1a2b3c" or "artifact sha256:…". Its errors are
// permanent: that exact tree will never grow the directory, so a human has
// to change the spec or publish a new revision.
func checkProgramDir(root, sub, where string) error {
	err := findProgramDir(root, sub, where)
	if err != nil {
		err.Permanent = true
		return err
	}
	return nil
}

// findProgramDir does the work of checkProgramDir.
func findProgramDir(root, sub, where string) *Error {
	full := filepath.Join(root, filepath.FromSlash(sub))
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return newError(ReasonInternal, FieldNone, err, "resolving the source root: %v", err)
	}
	real, err := filepath.EvalSymlinks(full)
	if err != nil {
		return newError(ReasonNotFound, FieldDir, err, "%q: no such directory in %s", sub, where)
	}
	if !within(realRoot, real) {
		return newError(ReasonInvalidSpec, FieldDir, nil, "%q: resolves outside the source tree in %s", sub, where)
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.IsDir() {
		return newError(ReasonNotFound, FieldDir, err, "%q: no such directory in %s", sub, where)
	}
	for _, name := range projectFiles {
		if fi, err := os.Stat(filepath.Join(real, name)); err == nil && fi.Mode().IsRegular() {
			return nil
		}
	}
	return newError(ReasonNotFound, FieldDir, nil, "%q: no Pulumi.yaml in %s", sub, where)
}

// within reports whether path is root or lies below it; both must be clean
// absolute paths.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

// programPath returns the absolute path of subdirectory sub (from
// cleanSubdir) of target.
func programPath(target, sub string) string {
	abs, err := filepath.Abs(target)
	if err != nil {
		abs = target
	}
	return filepath.Join(abs, filepath.FromSlash(sub))
}
