package source

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// maxLinkHops bounds symlink chains when checking where a link leads, like
// the kernel's own limit.
const maxLinkHops = 40

// extractTarGz unpacks a gzip-compressed tar stream into dir; see
// extractTar for the safety rules.
func extractTarGz(r io.Reader, dir string, lim Limits) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return newError(ReasonUnsafeArchive, FieldURL, err, "artifact is not a valid tar.gz: %v", err)
	}
	defer gz.Close()
	return extractTar(gz, dir, lim)
}

// extractTar unpacks a tar stream into the existing directory dir. Every
// write goes through an os.Root, so no entry can land outside dir however
// its path or the links before it are built. On top of that, entries with
// absolute or escaping paths, links whose target leaves the tree, device
// files and other special entries are refused, and lim caps entry count
// and content size. On error dir may hold part of the archive; callers
// extract into a staging directory and discard it.
func extractTar(r io.Reader, dir string, lim Limits) error {
	lim = lim.withDefaults()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return newError(ReasonInternal, FieldNone, err, "opening extraction directory: %v", err)
	}
	defer root.Close()
	x := &extractor{root: root, dir: dir, lim: lim}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return newError(ReasonUnsafeArchive, FieldURL, err, "artifact is not a valid tar archive: %v", err)
		}
		if err := x.entry(hdr, tr); err != nil {
			return err
		}
	}
	for _, link := range x.links {
		if err := x.leadsInside(link); err != nil {
			return err
		}
	}
	return nil
}

// extractor carries the state of one extraction.
type extractor struct {
	root  *os.Root
	dir   string
	lim   Limits
	files int
	bytes int64
	links []string
}

// unsafe builds the error for a refused entry.
func unsafe(name, format string, args ...any) *Error {
	return newError(ReasonUnsafeArchive, FieldURL, nil, "archive entry %q: %s", name, fmt.Sprintf(format, args...))
}

// entry writes one archive entry.
func (x *extractor) entry(hdr *tar.Header, content io.Reader) error {
	x.files++
	if x.files > x.lim.MaxFiles {
		return newError(ReasonTooLarge, FieldURL, nil, "artifact has more than %d entries", x.lim.MaxFiles)
	}
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	name, err := entryName(hdr.Name)
	if err != nil {
		return err
	}
	if name == "." {
		if hdr.Typeflag == tar.TypeDir {
			return nil
		}
		return unsafe(hdr.Name, "names the archive root")
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return x.write(name, x.root.MkdirAll(name, 0o755))
	case tar.TypeReg: // the reader reports the old TypeRegA as TypeReg
		return x.file(name, hdr, content)
	case tar.TypeSymlink:
		return x.symlink(name, hdr.Linkname)
	case tar.TypeLink:
		return x.hardlink(name, hdr.Linkname)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return unsafe(name, "device and FIFO entries are not allowed")
	}
	return unsafe(name, "entry type %q is not supported", string(hdr.Typeflag))
}

// entryName cleans an archive path, refusing absolute paths and paths that
// climb out of the tree.
func entryName(raw string) (string, error) {
	if raw == "" || strings.ContainsRune(raw, 0) {
		return "", unsafe(raw, "empty or malformed name")
	}
	if strings.HasPrefix(raw, "/") || filepath.IsAbs(raw) {
		return "", unsafe(raw, "absolute paths are not allowed")
	}
	name := path.Clean(raw)
	if name != "." && !filepath.IsLocal(name) {
		return "", unsafe(raw, "path leaves the archive root")
	}
	return name, nil
}

// prepare creates name's parent directories and removes an earlier entry
// of the same name, so later entries win as with tar itself.
func (x *extractor) prepare(name string) error {
	if err := x.write(name, x.root.MkdirAll(path.Dir(name), 0o755)); err != nil {
		return err
	}
	if err := x.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return x.write(name, err)
	}
	return nil
}

// file writes a regular file, counting its bytes against the limit.
func (x *extractor) file(name string, hdr *tar.Header, content io.Reader) error {
	if hdr.Size > x.lim.MaxExtractedBytes-x.bytes {
		return newError(ReasonTooLarge, FieldURL, nil, "artifact extracts to more than %d bytes", x.lim.MaxExtractedBytes)
	}
	if err := x.prepare(name); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if hdr.Mode&0o111 != 0 {
		mode = 0o755
	}
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return x.write(name, err)
	}
	n, err := io.Copy(f, content)
	x.bytes += n
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return newError(ReasonUnsafeArchive, FieldURL, err, "artifact is truncated at entry %q", name)
		}
		return x.write(name, err)
	}
	return nil
}

// symlink creates a relative symlink whose target, seen from the link's
// directory, stays inside the tree. The final check in leadsInside catches
// links that only escape through other links.
func (x *extractor) symlink(name, target string) error {
	if target == "" || strings.ContainsRune(target, 0) {
		return unsafe(name, "symlink has an empty or malformed target")
	}
	if strings.HasPrefix(target, "/") || filepath.IsAbs(target) {
		return unsafe(name, "symlink to absolute path %q is not allowed", target)
	}
	if !filepath.IsLocal(path.Join(path.Dir(name), target)) {
		return unsafe(name, "symlink target %q leaves the archive root", target)
	}
	if err := x.prepare(name); err != nil {
		return err
	}
	x.links = append(x.links, name)
	return x.write(name, x.root.Symlink(target, name))
}

// hardlink links name to an earlier regular file of the archive.
func (x *extractor) hardlink(name, target string) error {
	clean, err := entryName(target)
	if err != nil || clean == "." {
		return unsafe(name, "hard link target %q leaves the archive root", target)
	}
	fi, err := x.root.Lstat(clean)
	if err != nil || !fi.Mode().IsRegular() {
		// Linking a symlink would move its relative target; linking a
		// directory is impossible. Only earlier regular files qualify.
		return unsafe(name, "hard link target %q is not an earlier regular file", target)
	}
	if err := x.prepare(name); err != nil {
		return err
	}
	return x.write(name, x.root.Link(clean, name))
}

// write maps a file system error for entry name: resource exhaustion is a
// local, transient failure; anything else (conflicting entries, a path
// through a link that leaves the root) is the archive's fault.
func (x *extractor) write(name string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EIO) {
		return newError(ReasonInternal, FieldNone, err, "writing archive entry %q: %v", name, err)
	}
	return newError(ReasonUnsafeArchive, FieldURL, err, "archive entry %q: cannot be written inside the tree: %v", name, pathErrText(err))
}

// pathErrText returns err's text without the absolute staging path that
// *fs.PathError puts in front, which means nothing to a user.
func pathErrText(err error) string {
	var perr *fs.PathError
	if errors.As(err, &perr) {
		return perr.Op + ": " + perr.Err.Error()
	}
	var lerr *os.LinkError
	if errors.As(err, &lerr) {
		return lerr.Op + ": " + lerr.Err.Error()
	}
	return err.Error()
}

// leadsInside follows the symlink name through the extracted tree, link by
// link, and fails if any step would climb above the root or reach an
// absolute path. Components that do not exist are resolved lexically,
// which can only be stricter than the kernel (it would stop there).
func (x *extractor) leadsInside(name string) error {
	var resolved []string
	todo := strings.Split(name, "/")
	hops := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(resolved) == 0 {
				return unsafe(name, "symlink leads outside the archive root")
			}
			resolved = resolved[:len(resolved)-1]
			continue
		}
		cur := filepath.Join(append([]string{x.dir}, append(resolved, c)...)...)
		fi, err := os.Lstat(cur)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			resolved = append(resolved, c)
			continue
		}
		if hops++; hops > maxLinkHops {
			return unsafe(name, "too many levels of symlinks")
		}
		target, err := os.Readlink(cur)
		if err != nil {
			return x.write(name, err)
		}
		if strings.HasPrefix(target, "/") || filepath.IsAbs(target) {
			return unsafe(name, "symlink leads to an absolute path")
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return nil
}
