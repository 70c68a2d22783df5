package image

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The OCI pre-defined annotation keys this package writes, both as config
// labels and as manifest annotations.
const (
	// AnnotationCreated is when the image was built (RFC 3339); here the
	// fixed Config.Created, never the wall clock.
	AnnotationCreated = "org.opencontainers.image.created"
	// AnnotationSource is the URL of the source the image was built from.
	AnnotationSource = "org.opencontainers.image.source"
	// AnnotationRevision is the source's revision (the git commit).
	AnnotationRevision = "org.opencontainers.image.revision"
	// AnnotationVersion is the version of the packaged software.
	AnnotationVersion = "org.opencontainers.image.version"
	// AnnotationTitle is the image's human-readable name.
	AnnotationTitle = "org.opencontainers.image.title"
	// AnnotationDescription says what the image holds.
	AnnotationDescription = "org.opencontainers.image.description"
	// AnnotationRefName is an image's tag in an OCI layout's index.json.
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// Config is everything an image says about itself besides its layers.
type Config struct {
	// Arch is the platform's architecture as GOARCH spells it (amd64,
	// arm64); the OS is always linux.
	Arch string
	// Created is the image's creation time, recorded in the config, the
	// history and the AnnotationCreated label; fixed for reproducibility.
	Created time.Time
	// User is the user (and group) processes run as, "uid:gid".
	User string
	// Entrypoint and Cmd are the command a container runs by default.
	Entrypoint, Cmd []string
	// Env is the environment, "NAME=value" entries.
	Env []string
	// WorkingDir is the processes' working directory.
	WorkingDir string
	// Labels are written as config labels and as manifest annotations;
	// AnnotationCreated is added from Created.
	Labels map[string]string
}

// Layer is one layer of an image with the history line describing it.
type Layer struct {
	// Layer is the content, from NewLayer.
	Layer v1.Layer
	// CreatedBy says in the image's history what the layer holds.
	CreatedBy string
}

// Assemble returns the image made of layers over an empty base, with OCI
// media types and cfg as its configuration.
func Assemble(cfg Config, layers []Layer) (v1.Image, error) {
	if cfg.Arch == "" || cfg.User == "" {
		return nil, errors.New("image config: Arch and User are required")
	}
	created := v1.Time{Time: cfg.Created.UTC()}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	adds := make([]mutate.Addendum, len(layers))
	for i, l := range layers {
		adds[i] = mutate.Addendum{
			Layer:     l.Layer,
			MediaType: types.OCILayer,
			History:   v1.History{Created: created, CreatedBy: l.CreatedBy},
		}
	}
	img, err := mutate.Append(img, adds...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	labels := maps.Clone(cfg.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[AnnotationCreated] = created.Format(time.RFC3339)
	cf.Architecture = cfg.Arch
	cf.OS = "linux"
	cf.Created = created
	cf.Config = v1.Config{
		User:       cfg.User,
		Entrypoint: slices.Clone(cfg.Entrypoint),
		Cmd:        slices.Clone(cfg.Cmd),
		Env:        slices.Clone(cfg.Env),
		WorkingDir: cfg.WorkingDir,
		Labels:     labels,
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	annotated, ok := mutate.Annotations(img, maps.Clone(labels)).(v1.Image)
	if !ok {
		return nil, fmt.Errorf("image: annotating the manifest did not return an image")
	}
	return annotated, nil
}
