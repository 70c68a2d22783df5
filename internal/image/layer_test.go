package image

import (
	"archive/tar"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestNewLayerSortsAndAddsParents(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(src, []byte("from disk"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := NewLayer([]Entry{
		FileFrom("/usr/local/bin/tool", 0o755, src),
		Symlink("/usr/bin/tool", "../local/bin/tool"),
		Dir("/tmp", fs.ModeSticky|0o777, 0, 0),
		File("/etc/motd", 0o644, []byte("hello")),
		Dir("/home/user", 0o700, 42, 43),
	}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	entries := readLayer(t, l)
	var names []string
	for _, e := range entries {
		names = append(names, e.hdr.Name)
		if !e.hdr.ModTime.Equal(epoch) {
			t.Errorf("%s: mtime %v, want the Unix epoch", e.hdr.Name, e.hdr.ModTime)
		}
	}
	want := []string{"etc/", "etc/motd", "home/", "home/user/", "tmp/", "usr/", "usr/bin/", "usr/bin/tool",
		"usr/local/", "usr/local/bin/", "usr/local/bin/tool"}
	if !slices.Equal(names, want) {
		t.Fatalf("entries %q, want %q", names, want)
	}
	byName := map[string]*tar.Header{}
	for _, e := range entries {
		byName[e.hdr.Name] = e.hdr
		switch e.hdr.Name {
		case "usr/local/bin/tool":
			if e.content != "from disk" || e.hdr.Mode != 0o755 {
				t.Errorf("tool: content %q mode %o", e.content, e.hdr.Mode)
			}
		case "etc/motd":
			if e.content != "hello" || e.hdr.Mode != 0o644 {
				t.Errorf("motd: content %q mode %o", e.content, e.hdr.Mode)
			}
		}
	}
	if h := byName["usr/"]; h.Typeflag != tar.TypeDir || h.Mode != 0o755 || h.Uid != 0 {
		t.Errorf("added parent usr/: %+v", h)
	}
	if h := byName["tmp/"]; h.Mode != 0o1777 {
		t.Errorf("tmp/: mode %o, want 1777", h.Mode)
	}
	if h := byName["home/user/"]; h.Uid != 42 || h.Gid != 43 || h.Mode != 0o700 {
		t.Errorf("home/user/: uid %d gid %d mode %o", h.Uid, h.Gid, h.Mode)
	}
	if h := byName["usr/bin/tool"]; h.Typeflag != tar.TypeSymlink || h.Linkname != "../local/bin/tool" {
		t.Errorf("usr/bin/tool: %+v", h)
	}
}

func TestNewLayerDigestIgnoresOrderAndHostFileMetadata(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte("same"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// b differs from a only in its mode and times on the build machine.
	if err := os.Chmod(b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(b, epoch, epoch); err != nil {
		t.Fatal(err)
	}
	one, err := NewLayer([]Entry{FileFrom("/x", 0o644, a), File("/y", 0o644, nil)}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	two, err := NewLayer([]Entry{File("/y", 0o644, nil), FileFrom("/x", 0o644, b)}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := one.Digest()
	d2, _ := two.Digest()
	if d1 != d2 {
		t.Errorf("digests differ: %s and %s", d1, d2)
	}
}

func TestNewLayerRejects(t *testing.T) {
	for name, tc := range map[string]struct {
		entries []Entry
		want    string
	}{
		"relative path": {[]Entry{File("etc/x", 0o644, nil)}, "must be absolute"},
		"root":          {[]Entry{Dir("/", 0o755, 0, 0)}, "root directory"},
		"twice":         {[]Entry{File("/x", 0o644, nil), File("/x/", 0o644, nil)}, "given twice"},
		"file parent":   {[]Entry{File("/x", 0o644, nil), File("/x/y", 0o644, nil)}, "is not a directory"},
		"missing source": {[]Entry{FileFrom("/x", 0o644, filepath.Join(t.TempDir(), "missing"))},
			"no such file"},
		"directory source": {[]Entry{FileFrom("/x", 0o644, t.TempDir())}, "not a regular file"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewLayer(tc.entries, t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
