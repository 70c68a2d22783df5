package artifact

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"
	"time"
)

// unpack lists a tar.gz's headers and file contents, in archive order.
func unpack(t *testing.T, data []byte) ([]*tar.Header, map[string]string) {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var hdrs []*tar.Header
	contents := map[string]string{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return hdrs, contents
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		hdrs = append(hdrs, hdr)
		if hdr.Typeflag == tar.TypeReg {
			contents[hdr.Name] = string(b)
		}
	}
}

func TestPackIsDeterministic(t *testing.T) {
	files := map[string][]byte{
		"Pulumi.yaml":      []byte("name: a\nruntime: yaml\n"),
		"lib/util/x.yaml":  []byte("x"),
		"lib/b.txt":        []byte("b"),
		"z-last.txt":       []byte(""),
		"lib-sibling.yaml": []byte("s"),
	}
	first, err := Pack(files)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		// Go randomizes map iteration: a copy built in another order must
		// give the same bytes.
		again := map[string][]byte{}
		for k, v := range files {
			again[k] = v
		}
		got, err := Pack(again)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, got) {
			t.Fatal("two packs of the same files differ")
		}
	}
	d1, size, err := Digest(bytes.NewReader(first))
	if err != nil || size != int64(len(first)) || !strings.HasPrefix(d1, "sha256:") || len(d1) != len("sha256:")+64 {
		t.Fatalf("Digest = %q, %d, %v", d1, size, err)
	}
	files["lib/b.txt"] = []byte("changed")
	changed, err := Pack(files)
	if err != nil {
		t.Fatal(err)
	}
	if d2, _, _ := Digest(bytes.NewReader(changed)); d2 == d1 {
		t.Error("different content gave the same digest")
	}
}

func TestPackEntries(t *testing.T) {
	data, err := Pack(map[string][]byte{"b/c.yaml": []byte("c"), "a.yaml": []byte("a"), "b/d/e": []byte("e")})
	if err != nil {
		t.Fatal(err)
	}
	hdrs, contents := unpack(t, data)
	var names []string
	for _, h := range hdrs {
		names = append(names, h.Name)
		if !h.ModTime.Equal(time.Unix(0, 0)) || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: mtime %v, owner %d:%d %q:%q; want epoch and no owner", h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname)
		}
		wantMode := int64(fileMode)
		if h.Typeflag == tar.TypeDir {
			wantMode = dirMode
		}
		if h.Mode != wantMode {
			t.Errorf("%s: mode %o, want %o", h.Name, h.Mode, wantMode)
		}
	}
	if got, want := strings.Join(names, " "), "a.yaml b/ b/c.yaml b/d/ b/d/e"; got != want {
		t.Errorf("entries = %q, want %q", got, want)
	}
	if contents["b/d/e"] != "e" || contents["a.yaml"] != "a" {
		t.Errorf("contents = %v", contents)
	}
}

func TestPackRejectsBadNames(t *testing.T) {
	tests := []struct {
		name  string
		files map[string][]byte
	}{
		{name: "empty", files: map[string][]byte{"": nil}},
		{name: "absolute", files: map[string][]byte{"/etc/passwd": nil}},
		{name: "parent", files: map[string][]byte{"../x": nil}},
		{name: "dot-dot", files: map[string][]byte{"..": nil}},
		{name: "dot", files: map[string][]byte{".": nil}},
		{name: "unclean", files: map[string][]byte{"a//b": nil}},
		{name: "inner parent", files: map[string][]byte{"a/../../b": nil}},
		{name: "trailing slash", files: map[string][]byte{"a/": nil}},
		{name: "file and directory", files: map[string][]byte{"a": nil, "a/b": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Pack(tt.files); err == nil {
				t.Errorf("Pack(%v) succeeded, want an error", tt.files)
			}
		})
	}
}
