package source

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzExtract feeds arbitrary bytes to the tar extractor and checks that,
// whatever it returns, nothing was written outside the target directory,
// and that a successful extraction holds only regular files, directories
// and symlinks that resolve inside the tree.
func FuzzExtract(f *testing.F) {
	seeds := [][]tarEntry{
		program,
		{{name: "../x", body: "evil"}},
		{{name: "/tmp/stackyard-fuzz-abs", body: "evil"}},
		{{name: "a/../../x", body: "evil"}},
		{{name: "l", typ: tar.TypeSymlink, link: "../x"}, {name: "l/y", body: "evil"}},
		{{name: "s", typ: tar.TypeSymlink, link: "."}, {name: "l", typ: tar.TypeSymlink, link: "s/.."}, {name: "l/evil", body: "evil"}},
		{{name: "d/", typ: tar.TypeDir}, {name: "d/l", typ: tar.TypeSymlink, link: "../.."}},
		{{name: "f", body: "x"}, {name: "h", typ: tar.TypeLink, link: "f"}, {name: "h2", typ: tar.TypeLink, link: "../f"}},
		{{name: "dev", typ: tar.TypeChar}},
		{{name: "a", body: "1"}, {name: "a", typ: tar.TypeSymlink, link: "b"}, {name: "a/c", body: "2"}},
	}
	for _, s := range seeds {
		f.Add(makeTar(f, s...))
	}
	f.Add([]byte{})
	f.Add([]byte("not a tar"))

	f.Fuzz(func(t *testing.T, data []byte) {
		base := t.TempDir()
		// Nest the target so escapes of a few levels land inside base,
		// where they are easy to spot.
		dir := filepath.Join(base, "p", "q", "root")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		outside := outsidePaths(data, dir)
		for _, p := range outside {
			if _, err := os.Lstat(p); err == nil {
				return // exists already; cannot tell a write apart
			}
		}
		err := extractTar(bytes.NewReader(data), dir, Limits{MaxExtractedBytes: 1 << 20, MaxFiles: 256})
		if err != nil && ReasonOf(err) == ReasonInternal {
			t.Fatalf("extraction failed internally: %v", err)
		}
		assertOnly(t, base, []string{"p", "p/q", "p/q/root"}, dir)
		for _, p := range outside {
			if _, err := os.Lstat(p); err == nil {
				t.Fatalf("archive wrote outside the target: %s", p)
			}
		}
		if err == nil {
			assertSafeTree(t, dir)
		}
	})
}

// outsidePaths lists the places outside dir that the archive's entry and
// link names point at, as far as the archive can be parsed.
func outsidePaths(data []byte, dir string) []string {
	var out []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err != nil {
			return out
		}
		for _, name := range []string{hdr.Name, hdr.Linkname} {
			if name == "" || strings.ContainsRune(name, 0) {
				continue
			}
			p := name
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, name)
			}
			if !within(dir, filepath.Clean(p)) {
				out = append(out, filepath.Clean(p))
			}
		}
		_, _ = io.Copy(io.Discard, tr)
	}
}

// assertOnly fails unless base contains exactly the given entries outside
// dir (whose own content is not examined).
func assertOnly(t *testing.T, base string, want []string, dir string) {
	t.Helper()
	allowed := map[string]bool{}
	for _, w := range want {
		allowed[w] = true
	}
	_ = filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if p == base {
			return nil
		}
		if p == dir {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(base, p)
		if !allowed[filepath.ToSlash(rel)] {
			t.Fatalf("archive wrote outside the target: %s", p)
		}
		return nil
	})
}

// assertSafeTree fails if dir holds anything but regular files,
// directories and symlinks resolving inside dir.
func assertSafeTree(t *testing.T, dir string) {
	t.Helper()
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		switch mode := d.Type(); {
		case mode.IsRegular(), mode.IsDir():
		case mode&fs.ModeSymlink != 0:
			if real, err := filepath.EvalSymlinks(p); err == nil && !within(realDir, real) {
				t.Fatalf("symlink %s resolves outside the tree to %s", p, real)
			}
		default:
			t.Fatalf("special file %s (%v) extracted", p, mode)
		}
		return nil
	})
}
