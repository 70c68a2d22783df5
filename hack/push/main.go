// Command push copies the images `make images` built, each an OCI image
// layout holding one image, to a registry, digest unchanged, with no
// container engine and no tool outside this repository: `make push`
// runs it (docs/container-images.md). Credentials come from the docker
// config file (~/.docker/config.json, or $DOCKER_CONFIG), as `docker
// login`, `crane auth login` or `helm registry login` write it; a
// registry that needs none works without.
//
//	go run ./hack/push [-insecure] LAYOUT=REF...
//
// Each argument pushes the single image of the layout directory LAYOUT to
// the reference REF (registry/repository:tag) and prints REF@digest.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func main() {
	insecure := flag.Bool("insecure", false, "talk to the registry over plain HTTP (a registry on loopback, say)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: push [-insecure] LAYOUT=REF...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	for _, arg := range flag.Args() {
		dir, ref, ok := strings.Cut(arg, "=")
		if !ok || dir == "" || ref == "" {
			fmt.Fprintf(os.Stderr, "push: %q: want LAYOUT=REF\n", arg)
			os.Exit(2)
		}
		if err := push(os.Stdout, dir, ref, *insecure, authn.DefaultKeychain); err != nil {
			fmt.Fprintln(os.Stderr, "push:", err)
			os.Exit(1)
		}
	}
}

// push writes the one image of the OCI layout dir to ref, with credentials
// from keychain, and prints ref@digest to out.
func push(out io.Writer, dir, ref string, insecure bool, keychain authn.Keychain) error {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	tag, err := name.NewTag(ref, opts...)
	if err != nil {
		return fmt.Errorf("%s: not an image reference with a tag: %w", ref, err)
	}
	index, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return fmt.Errorf("%s: not an OCI image layout (run `make images` first): %w", dir, err)
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if len(manifest.Manifests) != 1 {
		return fmt.Errorf("%s holds %d images, want one (push the per-image layouts, stackyard-operator.oci and stackyard-agent.oci)", dir, len(manifest.Manifests))
	}
	img, err := index.Image(manifest.Manifests[0].Digest)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if err := remote.Write(tag, img, remote.WithAuthFromKeychain(keychain)); err != nil {
		return fmt.Errorf("pushing %s to %s: %w", dir, ref, err)
	}
	_, err = fmt.Fprintf(out, "%s@%s\n", tag.Name(), digest)
	return err
}
