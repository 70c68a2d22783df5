package image

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// writeFixture builds the fixture images and writes them into a new
// directory, which it returns with what Write reported.
func writeFixture(t *testing.T, in Inputs) (string, Images, []Written) {
	t.Helper()
	imgs := mustBuild(t, in)
	opTag, _ := name.NewTag("example.com/stackyard:v1")
	agentTag, _ := name.NewTag("example.com/stackyard-agent:v1")
	dir := t.TempDir()
	written, err := Write(dir, []Named{
		{File: "stackyard-operator", Tag: opTag, Image: imgs.Operator},
		{File: "stackyard-agent", Tag: agentTag, Image: imgs.Agent},
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir, imgs, written
}

func TestWriteOutputs(t *testing.T) {
	dir, imgs, written := writeFixture(t, fixtureInputs(t))
	want := []v1.Image{imgs.Operator, imgs.Agent}
	files := []string{"stackyard-operator", "stackyard-agent"}
	tags := []string{"example.com/stackyard:v1", "example.com/stackyard-agent:v1"}

	idx, err := layout.ImageIndexFromPath(filepath.Join(dir, LayoutDir))
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 2 {
		t.Fatalf("the combined layout holds %d manifests, want 2", len(im.Manifests))
	}
	for i, img := range want {
		d := digest(t, img)
		if written[i].Digest != d {
			t.Errorf("%s: reported digest %s, want %s", files[i], written[i].Digest, d)
		}
		desc := im.Manifests[i]
		if desc.Digest != d || desc.Annotations["io.containerd.image.name"] != tags[i] ||
			desc.Annotations[AnnotationRefName] != "v1" || desc.Platform == nil || desc.Platform.Architecture != "amd64" {
			t.Errorf("%s: index entry %+v", files[i], desc)
		}

		// The per-image layout holds this image only, unchanged.
		single, err := layout.ImageIndexFromPath(written[i].Layout)
		if err != nil {
			t.Fatal(err)
		}
		sm, _ := single.IndexManifest()
		if len(sm.Manifests) != 1 || sm.Manifests[0].Digest != d {
			t.Errorf("%s: its own layout holds %+v", files[i], sm.Manifests)
		}
		fromLayout, err := single.Image(d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fromLayout.Layers(); err != nil {
			t.Fatal(err)
		}

		// The tarball keeps the config and the layers.
		tag, _ := name.NewTag(tags[i])
		fromTar, err := tarball.ImageFromPath(written[i].Tarball, &tag)
		if err != nil {
			t.Fatal(err)
		}
		cfg, _ := fromTar.ConfigName()
		if wantCfg, _ := img.ConfigName(); cfg != wantCfg || written[i].ConfigDigest != wantCfg {
			t.Errorf("%s: tarball config %s, reported %s, want %s", files[i], cfg, written[i].ConfigDigest, wantCfg)
		}
		if got := layerDigests(t, fromTar); len(got) != len(layerDigests(t, img)) {
			t.Errorf("%s: tarball has %d layers", files[i], len(got))
		}
	}

	digests, err := os.ReadFile(filepath.Join(dir, DigestsFile))
	if err != nil {
		t.Fatal(err)
	}
	wantDigests := tags[0] + "@" + digest(t, imgs.Operator).String() + "\n" +
		tags[1] + "@" + digest(t, imgs.Agent).String() + "\n"
	if string(digests) != wantDigests {
		t.Errorf("digests.txt:\n%s\nwant:\n%s", digests, wantDigests)
	}

	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if filepath.Ext(p) == ".tmp" {
			t.Errorf("left behind %s", p)
		}
		if st, err := os.Stat(p); err == nil && st.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v, want 0644", p, st.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestWriteIsReproducible(t *testing.T) {
	in := fixtureInputs(t)
	one, _, _ := writeFixture(t, in)
	in.Scratch = t.TempDir()
	two, _, _ := writeFixture(t, in)
	for _, f := range []string{
		"stackyard-operator.tar", "stackyard-agent.tar", DigestsFile,
		filepath.Join(LayoutDir, "index.json"), filepath.Join("stackyard-agent.oci", "index.json"),
	} {
		a, err := os.ReadFile(filepath.Join(one, f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(two, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two writes of the same images", f)
		}
	}
}

func TestWriteReplacesEarlierOutputs(t *testing.T) {
	in := fixtureInputs(t)
	dir, _, _ := writeFixture(t, in)
	stale := filepath.Join(dir, LayoutDir, "blobs", "sha256", "stale")
	if err := os.WriteFile(stale, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	imgs := mustBuild(t, in)
	tag, _ := name.NewTag("example.com/stackyard:v2")
	if _, err := Write(dir, []Named{{File: "stackyard-operator", Tag: tag, Image: imgs.Operator}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the layout was not replaced: %v", err)
	}
	idx, err := layout.ImageIndexFromPath(filepath.Join(dir, LayoutDir))
	if err != nil {
		t.Fatal(err)
	}
	if im, _ := idx.IndexManifest(); len(im.Manifests) != 1 {
		t.Errorf("the layout holds %d manifests, want 1", len(im.Manifests))
	}
}
