package image

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// fixtureInputs writes small stand-ins for the binaries and the CA bundle
// into a temporary directory and returns Inputs naming them, with a fresh
// scratch directory.
func fixtureInputs(t *testing.T) Inputs {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return Inputs{
		Stackyard:          write("stackyard", "stackyard binary\n"),
		StackyardAgent:     write("stackyard-agent", "lean agent binary\n"),
		Pulumi:             write("pulumi", "pulumi binary\n"),
		PulumiLanguageYAML: write("pulumi-language-yaml", "yaml host\n"),
		CACertificates:     write("ca.crt", "-----BEGIN CERTIFICATE-----\nfixture\n-----END CERTIFICATE-----\n"),
		Arch:               "amd64",
		Created:            time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Version:            "v1.2.3",
		Revision:           "0123456789abcdef0123456789abcdef01234567",
		Source:             "https://example.com/stackyard",
		PulumiVersion:      "v3.170.0",
		Scratch:            t.TempDir(),
	}
}

// mustBuild builds the images of in, failing the test on error.
func mustBuild(t *testing.T, in Inputs) Images {
	t.Helper()
	imgs, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	return imgs
}

// digest is img's manifest digest.
func digest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// layerDigests are img's layers' digests, bottom first.
func layerDigests(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]v1.Hash, len(layers))
	for i, l := range layers {
		if out[i], err = l.Digest(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// tarEntry is one entry of a layer as read back, with its content.
type tarEntry struct {
	hdr     *tar.Header
	content string
}

// readLayer returns the entries of l in the order they are stored.
func readLayer(t *testing.T, l v1.Layer) []tarEntry {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var out []tarEntry
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tarEntry{hdr: hdr, content: string(data)})
	}
}

// imageFiles returns every entry of every layer of img, by name; a later
// layer's entry replaces an earlier one's.
func imageFiles(t *testing.T, img v1.Image) map[string]tarEntry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]tarEntry{}
	for _, l := range layers {
		for _, e := range readLayer(t, l) {
			files[e.hdr.Name] = e
		}
	}
	return files
}
