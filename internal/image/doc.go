// Package image assembles stackyard's container images from files on the
// build machine, with go-containerregistry and no container engine.
//
// Two images are built, both from scratch (no distribution, no shell):
//
//   - the operator image: the stackyard binary with its lean agent
//     (stackyard-agent, of the same build), CA certificates, and
//     /etc/passwd and /etc/group entries for the nonroot user (65532), which
//     it runs as;
//   - the agent (workspace) image: the operator image plus a layer with the
//     pinned pulumi CLI and the YAML language host; Pulumi keeps its state
//     in the home directory (~/.pulumi), which every user can write to, so
//     that the image also runs as a pod's runAsUser other than 65532.
//
// The agent image is the operator image with one more layer, so a node that
// pulls both stores the shared layers once.
//
// # Reproducibility
//
// The same inputs give the same digests. Every tar entry is written in path
// order with a fixed owner, mode and modification time (the Unix epoch), and
// layers are compressed with the standard library's gzip at a fixed level.
// The image's creation time (the config's "created", its history and the
// org.opencontainers.image.created label) is an input, which the Makefile
// takes from SOURCE_DATE_EPOCH or the last commit's time. The layers hold
// no timestamp at all, so a layer whose files did not change keeps its
// digest from one commit to the next.
//
// The inputs are therefore: the bytes of each file put in the image (the
// stackyard and stackyard-agent binaries, pulumi, pulumi-language-yaml and
// the build machine's CA bundle), the version, revision, source URL and creation time recorded in
// the metadata, the target architecture, and the versions of this package,
// go-containerregistry and Go's compress/gzip.
package image
