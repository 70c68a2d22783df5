package source

import (
	"os"
	"path/filepath"
)

// staging is a temporary directory beside a fetch's target. Content is
// assembled there and moved into place by promote only when the whole fetch
// succeeded; discard removes it otherwise. Keeping it on the same file
// system as the target makes the final move a rename.
type staging struct {
	target string
	dir    string
}

// stage validates target and creates an empty staging directory beside it.
func stage(target string) (*staging, error) {
	if target == "" {
		return nil, newError(ReasonInvalidSpec, FieldNone, nil, "target directory must not be empty")
	}
	abs, err := filepath.Abs(target)
	if err != nil {
		return nil, newError(ReasonInvalidSpec, FieldNone, err, "target %q: %v", target, err)
	}
	if fi, err := os.Lstat(abs); err == nil && !fi.IsDir() {
		return nil, newError(ReasonInvalidSpec, FieldNone, nil, "target %q exists and is not a directory", target)
	}
	parent := filepath.Dir(abs)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, newError(ReasonInternal, FieldNone, err, "creating parent of target %q: %v", target, err)
	}
	dir, err := os.MkdirTemp(parent, "."+filepath.Base(abs)+".staging-")
	if err != nil {
		return nil, newError(ReasonInternal, FieldNone, err, "creating staging directory beside %q: %v", target, err)
	}
	// MkdirTemp creates the directory private; the program's files should be
	// readable like any checkout.
	if err := os.Chmod(dir, 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return nil, newError(ReasonInternal, FieldNone, err, "preparing staging directory beside %q: %v", target, err)
	}
	return &staging{target: abs, dir: dir}, nil
}

// promote moves the staged content to the target. Previous content at the
// target is moved aside first and restored if the final rename fails, so
// the target is never left half-replaced; it is deleted once the new
// content is in place.
func (s *staging) promote() error {
	if _, err := os.Lstat(s.target); os.IsNotExist(err) {
		if err := os.Rename(s.dir, s.target); err != nil {
			return newError(ReasonInternal, FieldNone, err, "moving fetched source into %q: %v", s.target, err)
		}
		return nil
	}
	// Reserve a unique name, then free it: os.Rename refuses to replace a
	// directory, even an empty one.
	aside, err := os.MkdirTemp(filepath.Dir(s.target), "."+filepath.Base(s.target)+".previous-")
	if err == nil {
		err = os.Remove(aside)
	}
	if err != nil {
		return newError(ReasonInternal, FieldNone, err, "preparing to replace %q: %v", s.target, err)
	}
	if err := os.Rename(s.target, aside); err != nil {
		return newError(ReasonInternal, FieldNone, err, "moving previous content of %q aside: %v", s.target, err)
	}
	if err := os.Rename(s.dir, s.target); err != nil {
		if rerr := os.Rename(aside, s.target); rerr != nil {
			return newError(ReasonInternal, FieldNone, err,
				"replacing %q failed (%v) and restoring its previous content from %q failed too: %v", s.target, err, aside, rerr)
		}
		return newError(ReasonInternal, FieldNone, err, "moving fetched source into %q: %v", s.target, err)
	}
	// The new content is in place; old content that cannot be removed is
	// only clutter, not a failed fetch.
	_ = os.RemoveAll(aside)
	return nil
}

// discard removes the staging directory; it is a no-op after a successful
// promote, because the directory has been renamed away.
func (s *staging) discard() {
	_ = os.RemoveAll(s.dir)
}

// place runs fill on a fresh staging directory for target and promotes it
// on success. On any error the staging directory is removed and the target
// is untouched.
func place(target string, fill func(dir string) error) error {
	st, err := stage(target)
	if err != nil {
		return err
	}
	defer st.discard()
	if err := fill(st.dir); err != nil {
		return err
	}
	return st.promote()
}
