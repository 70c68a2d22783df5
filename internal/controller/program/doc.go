// Package program is the Program controller. It renders each generation of
// a Program (a Pulumi YAML program written as a Kubernetes object) into a
// Pulumi YAML project, packs it as a tar.gz in the operator's artifact
// store (internal/artifact) and publishes it in status.artifact, from where
// the workspaces of the Stacks that reference the Program download it.
//
// The artifact of generation N has revision "N" (the decimal generation)
// and lives at program/<namespace>/<name>/N.tar.gz under the store's base
// URL. The store keeps the current and the previous revision, so a
// workspace still downloading the previous one is not cut off. Deleting a
// Program removes its artifacts before the finalizer is released.
package program
