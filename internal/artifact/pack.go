package artifact

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"
)

// epoch is the modification time of every packed entry: fixed, so that the
// archive depends on the files alone, and representable in every tar format.
var epoch = time.Unix(0, 0).UTC()

// Modes of packed entries. Pack records no owner, permissions beyond these,
// or time, so two packs of the same files are byte for byte equal.
const (
	fileMode = 0o644
	dirMode  = 0o755
)

// Pack returns a tar.gz holding files (slash-separated relative path →
// content). It is deterministic: entries are sorted by name, every parent
// directory gets its own entry, and modes, owners and times are fixed, so
// the same files always give the same bytes and so the same digest (for a
// given Go release, whose compressor could in principle change). Paths must
// be clean, relative and inside the archive ("a/b.yaml", not "../x",
// "/etc", "a//b" or "a/").
func Pack(files map[string][]byte) ([]byte, error) {
	names, err := entries(files)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	for _, name := range names {
		content, isFile := files[name]
		hdr := &tar.Header{Name: name, ModTime: epoch, Format: tar.FormatPAX}
		if isFile {
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, fileMode, int64(len(content))
		} else {
			hdr.Typeflag, hdr.Mode, hdr.Name = tar.TypeDir, dirMode, name+"/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("packing %s: %w", name, err)
		}
		if _, err := tw.Write(content); err != nil {
			return nil, fmt.Errorf("packing %s: %w", name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// entries checks the file names and returns them with their parent
// directories, sorted.
func entries(files map[string][]byte) ([]string, error) {
	seen := map[string]bool{}
	for name := range files {
		if name == "" || path.Clean(name) != name || strings.HasPrefix(name, "/") ||
			name == "." || name == ".." || strings.HasPrefix(name, "../") || strings.ContainsRune(name, 0) {
			return nil, fmt.Errorf("packing %q: not a clean relative path inside the archive", name)
		}
		seen[name] = true
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			if _, isFile := files[dir]; isFile {
				return nil, fmt.Errorf("packing %q: %q is both a file and a directory", name, dir)
			}
			seen[dir] = true
		}
	}
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

// Digest reads r to the end and returns its digest as "sha256:<hex>", the
// form Flux and the Program status use, together with its size in bytes.
func Digest(r io.Reader) (digest string, size int64, err error) {
	h := sha256.New()
	size, err = io.Copy(h, r)
	if err != nil {
		return "", size, err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), size, nil
}
