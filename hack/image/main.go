// Command image builds stackyard's container images (the operator image and
// the agent image) from binaries on disk, without a container engine, and
// writes them as tarballs and an OCI layout. `make images` runs it; see
// docs/container-images.md.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/stackyard/stackyard/internal/image"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// run parses the flags, builds both images and writes them.
func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var in image.Inputs
	out := fs.String("out", "dist/images", "output directory: <name>.tar, oci/ and digests.txt")
	operatorRef := fs.String("operator-ref", "ghcr.io/stackyard/stackyard:dev", "the operator image's tag")
	agentRef := fs.String("agent-ref", "ghcr.io/stackyard/stackyard-agent:dev", "the agent image's tag")
	created := fs.String("created", "0", "the images' creation time in Unix seconds (SOURCE_DATE_EPOCH)")
	fs.StringVar(&in.Stackyard, "stackyard", "", "the stackyard binary (linux, static)")
	fs.StringVar(&in.StackyardAgent, "stackyard-agent", "", "the stackyard-agent binary of the same build (linux, static)")
	fs.StringVar(&in.Pulumi, "pulumi", "bin/pulumi", "the pulumi CLI binary")
	fs.StringVar(&in.PulumiLanguageYAML, "pulumi-language-yaml", "bin/pulumi-language-yaml", "the YAML language host binary")
	fs.StringVar(&in.CACertificates, "ca-certificates", image.CACertificatesPath, "the CA bundle to copy")
	fs.StringVar(&in.Arch, "arch", runtime.GOARCH, "the images' architecture (GOARCH); every binary must match it")
	fs.StringVar(&in.Version, "version", "", "org.opencontainers.image.version")
	fs.StringVar(&in.Revision, "revision", "", "org.opencontainers.image.revision (the git commit)")
	fs.StringVar(&in.Source, "source", "https://github.com/stackyard/stackyard", "org.opencontainers.image.source")
	fs.StringVar(&in.PulumiVersion, "pulumi-version", "", "the pulumi CLI's version, for the agent image's description")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	secs, err := strconv.ParseInt(*created, 10, 64)
	if err != nil {
		return fmt.Errorf("-created %q: want Unix seconds: %w", *created, err)
	}
	in.Created = time.Unix(secs, 0).UTC()
	opTag, err := name.NewTag(*operatorRef)
	if err != nil {
		return fmt.Errorf("-operator-ref: %w", err)
	}
	agentTag, err := name.NewTag(*agentRef)
	if err != nil {
		return fmt.Errorf("-agent-ref: %w", err)
	}
	for _, bin := range []string{in.Stackyard, in.StackyardAgent, in.Pulumi, in.PulumiLanguageYAML} {
		if err := image.CheckExecutable(bin, in.Arch); err != nil {
			return err
		}
	}

	start := time.Now()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	scratch, err := os.MkdirTemp(*out, ".layers-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	in.Scratch = scratch
	imgs, err := image.Build(in)
	if err != nil {
		return err
	}
	written, err := image.Write(*out, []image.Named{
		{File: "stackyard-operator", Tag: opTag, Image: imgs.Operator},
		{File: "stackyard-agent", Tag: agentTag, Image: imgs.Agent},
	})
	if err != nil {
		return err
	}
	for i, ref := range []name.Tag{opTag, agentTag} {
		w := written[i]
		fmt.Printf("%s@%s\n  image ID (config) %s\n  %s (%.1f MiB), %s\n",
			ref.Name(), w.Digest, w.ConfigDigest, w.Tarball, float64(w.Size)/(1<<20), w.Layout)
	}
	fmt.Printf("OCI layout: %s; digests: %s (%s, created %s)\n",
		filepath.Join(*out, image.LayoutDir), filepath.Join(*out, image.DigestsFile),
		time.Since(start).Round(100*time.Millisecond), in.Created.Format(time.RFC3339))
	return nil
}
