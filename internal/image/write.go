package image

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// LayoutDir is the OCI image layout, under Write's output directory, that
// holds every image.
const LayoutDir = "oci"

// DigestsFile lists, under Write's output directory, each image's
// reference and manifest digest, one "ref@digest" a line.
const DigestsFile = "digests.txt"

// Named is an image with the tag it is written under.
type Named struct {
	// File is the base name of its outputs: File.tar and File.oci.
	File string
	// Tag is its reference, such as ghcr.io/stackyard/stackyard:v1.2.3.
	Tag name.Tag
	// Image is the image itself.
	Image v1.Image
}

// Written is what Write produced for one image.
type Written struct {
	// Tarball is the path of the image's docker-archive tarball.
	Tarball string
	// Layout is the path of the OCI layout holding this image alone.
	Layout string
	// Digest is the image's manifest digest, which the OCI layouts keep
	// and a push from them keeps.
	Digest v1.Hash
	// ConfigDigest is the config's digest, which every format keeps: it
	// is what `docker images` shows as the image ID.
	ConfigDigest v1.Hash
	// Size is the tarball's size in bytes.
	Size int64
}

// Write replaces, in dir, the outputs of every image:
//
//   - <File>.tar, a docker-archive tarball (the format of `docker save`,
//     which `docker load`, `ctr images import` and `kind load
//     image-archive` read); a loader builds its own manifest from it, so
//     only the config digest and the layers are kept;
//   - <File>.oci, an OCI layout holding that image alone, whose manifest
//     `crane push` or `skopeo copy` pushes unchanged;
//   - oci, an OCI layout holding them all, tagged in index.json with
//     org.opencontainers.image.ref.name and io.containerd.image.name
//     (blobs are hard-linked between the layouts where the file system
//     allows);
//   - digests.txt.
//
// Each output is written beside its final path and renamed over it, so a
// failed run leaves the previous outputs whole.
func Write(dir string, images []Named) ([]Written, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	all := filepath.Join(dir, LayoutDir)
	if err := writeLayout(all, "", images); err != nil {
		return nil, fmt.Errorf("OCI layout: %w", err)
	}
	out := make([]Written, 0, len(images))
	var digests strings.Builder
	for _, n := range images {
		w, err := writeTarball(dir, n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.File, err)
		}
		w.Layout = filepath.Join(dir, n.File+".oci")
		if err := writeLayout(w.Layout, all, []Named{n}); err != nil {
			return nil, fmt.Errorf("%s: OCI layout: %w", n.File, err)
		}
		out = append(out, w)
		fmt.Fprintf(&digests, "%s@%s\n", n.Tag.Name(), w.Digest)
	}
	if err := replaceFile(filepath.Join(dir, DigestsFile), []byte(digests.String())); err != nil {
		return nil, err
	}
	return out, nil
}

// writeTarball writes one image's docker-archive tarball.
func writeTarball(dir string, n Named) (Written, error) {
	digest, err := n.Image.Digest()
	if err != nil {
		return Written{}, err
	}
	config, err := n.Image.ConfigName()
	if err != nil {
		return Written{}, err
	}
	final := filepath.Join(dir, n.File+".tar")
	tmp := final + ".tmp"
	if err := tarball.WriteToFile(tmp, n.Tag, n.Image); err != nil {
		_ = os.Remove(tmp)
		return Written{}, err
	}
	st, err := os.Stat(tmp)
	if err != nil {
		return Written{}, err
	}
	if err := os.Rename(tmp, final); err != nil {
		return Written{}, err
	}
	return Written{Tarball: final, Digest: digest, ConfigDigest: config, Size: st.Size()}, nil
}

// writeLayout writes the images into a fresh OCI layout at dir. With from
// set (a layout already holding them), their blobs are hard-linked from it
// first, which the layout writer then keeps instead of copying.
func writeLayout(dir, from string, images []Named) error {
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return err
	}
	for _, n := range images {
		if from != "" {
			if err := linkBlobs(from, tmp, n.Image); err != nil {
				return err
			}
		}
		if err := p.WriteImage(n.Image); err != nil {
			return err
		}
		desc, err := indexDescriptor(n)
		if err != nil {
			return err
		}
		if err := p.AppendDescriptor(desc); err != nil {
			return err
		}
	}
	if err := plainFileModes(tmp); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// plainFileModes makes every file of the layout at dir 0644: the layout
// writer creates layers 0600 and index.json executable.
func plainFileModes(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chmod(p, 0o644) //nolint:gosec // the image build's own staging directory
	})
}

// indexDescriptor is n's entry in a layout's index.json: its manifest,
// platform and tag (with the annotation containerd reads the full name
// from on import).
func indexDescriptor(n Named) (v1.Descriptor, error) {
	raw, err := n.Image.RawManifest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	mt, err := n.Image.MediaType()
	if err != nil {
		return v1.Descriptor{}, err
	}
	cf, err := n.Image.ConfigFile()
	if err != nil {
		return v1.Descriptor{}, err
	}
	digest, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{
		MediaType: mt,
		Size:      int64(len(raw)),
		Digest:    digest,
		Platform:  &v1.Platform{OS: cf.OS, Architecture: cf.Architecture},
		Annotations: map[string]string{
			AnnotationRefName:          n.Tag.TagStr(),
			"io.containerd.image.name": n.Tag.Name(),
		},
	}, nil
}

// linkBlobs hard-links img's manifest, config and layers from the layout
// from into the layout to. A blob that cannot be linked is left for the
// layout writer to copy.
func linkBlobs(from, to string, img v1.Image) error {
	digests := make([]v1.Hash, 0, 8)
	for _, f := range []func() (v1.Hash, error){img.Digest, img.ConfigName} {
		h, err := f()
		if err != nil {
			return err
		}
		digests = append(digests, h)
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		h, err := l.Digest()
		if err != nil {
			return err
		}
		digests = append(digests, h)
	}
	for _, h := range digests {
		dst := filepath.Join(to, "blobs", h.Algorithm, h.Hex)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		_ = os.Link(filepath.Join(from, "blobs", h.Algorithm, h.Hex), dst)
	}
	return nil
}

// replaceFile writes data to path through a temporary file beside it.
func replaceFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
