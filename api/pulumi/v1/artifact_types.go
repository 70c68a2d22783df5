package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Artifact describes a packaged program source (a tarball) that the operator
// serves over HTTP for workspaces to download. Its shape follows Flux's
// artifacts, so Flux sources and Programs are fetched the same way.
type Artifact struct {
	// Path is the artifact's path relative to the root of the operator's
	// artifact storage.
	Path string `json:"path"`

	// URL is the HTTP address from which the artifact can be downloaded.
	URL string `json:"url"`

	// Revision identifies the source the artifact was built from, e.g. a
	// Program's generation or a content digest.
	Revision string `json:"revision"`

	// Digest is the digest of the tarball, as "<algorithm>:<checksum>",
	// e.g. "sha256:3f2a...".
	// +kubebuilder:validation:Pattern="^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$"
	// +optional
	Digest string `json:"digest,omitempty"`

	// LastUpdateTime is when the artifact was last built.
	LastUpdateTime metav1.Time `json:"lastUpdateTime"`

	// Size is the size of the tarball, in bytes.
	// +optional
	Size *int64 `json:"size,omitempty"`

	// Metadata holds extra information about the source, e.g. OCI
	// annotations.
	// +optional
	Metadata map[string]string `json:"metadata,omitempty"`
}

// HasRevision reports whether the artifact is set and was built from
// revision.
func (in *Artifact) HasRevision(revision string) bool {
	return in != nil && in.Revision == revision
}

// HasDigest reports whether the artifact is set and has the given digest.
func (in *Artifact) HasDigest(digest string) bool {
	return in != nil && in.Digest == digest
}
