package source

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// tarEntry is one entry of a test archive; typ defaults to a regular file.
type tarEntry struct {
	name string
	body string
	link string
	typ  byte
	mode int64
}

// makeTar builds an uncompressed tar archive from entries.
func makeTar(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, Format: tar.FormatPAX}
		if hdr.Typeflag == 0 {
			hdr.Typeflag = tar.TypeReg
		}
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
		if hdr.Typeflag == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("tar header %q: %v", e.name, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// gz compresses b.
func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sha256Hex returns the bare sha256 hex digest of b.
func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// program is the minimal content of a valid program archive.
var program = []tarEntry{
	{name: "Pulumi.yaml", body: "name: app\nruntime: yaml\n"},
	{name: "infra/", typ: tar.TypeDir, mode: 0o755},
	{name: "infra/Pulumi.yaml", body: "name: infra\nruntime: yaml\n"},
	{name: "bin/run.sh", body: "#!/bin/sh\n", mode: 0o755},
}

// withProgram returns program followed by extra entries.
func withProgram(extra ...tarEntry) []tarEntry {
	return append(append([]tarEntry{}, program...), extra...)
}
