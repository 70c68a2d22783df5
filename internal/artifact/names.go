package artifact

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Suffix ends the file name of every artifact.
const Suffix = ".tar.gz"

// Key names the object an artifact belongs to. Every field must be a single
// path segment of a safe shape, checked by Validate, so that keys map to
// storage paths and URLs one to one and never climb out of the store.
type Key struct {
	// Kind is the object's kind in lower case, e.g. "program".
	Kind string
	// Namespace is the object's namespace.
	Namespace string
	// Name is the object's name.
	Name string
}

var (
	// kindPattern: lower-case letters and digits, starting with a letter.
	kindPattern = regexp.MustCompile(`^[a-z][a-z0-9]{0,62}$`)
	// objectPattern: a Kubernetes DNS subdomain (namespaces and names).
	objectPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
	// revisionPattern: letters, digits, '.', '_' and '-', starting with a
	// letter or digit, so a revision is never "..", hidden, or a path.
	revisionPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

// Validate reports whether every field of k has a safe shape.
func (k Key) Validate() error {
	switch {
	case !kindPattern.MatchString(k.Kind):
		return fmt.Errorf("artifact kind %q: must be lower-case letters and digits", k.Kind)
	case !objectPattern.MatchString(k.Namespace):
		return fmt.Errorf("artifact namespace %q: not a valid namespace", k.Namespace)
	case !objectPattern.MatchString(k.Name):
		return fmt.Errorf("artifact name %q: not a valid object name", k.Name)
	}
	return nil
}

// dir returns the key's directory relative to the store root.
func (k Key) dir() string { return path.Join(k.Kind, k.Namespace, k.Name) }

// String returns the key as "kind/namespace/name", for messages.
func (k Key) String() string { return k.dir() }

// ValidateRevision reports whether revision can name an artifact file.
func ValidateRevision(revision string) error {
	if !revisionPattern.MatchString(revision) {
		return fmt.Errorf("artifact revision %q: must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", revision)
	}
	return nil
}

// Path returns where the artifact of revision of k lives relative to the
// store root (and to the server's base URL):
// "<kind>/<namespace>/<name>/<revision>.tar.gz". It does not validate.
func Path(k Key, revision string) string {
	return path.Join(k.dir(), revision+Suffix)
}

// parsePath splits a relative artifact path into its key and revision,
// accepting exactly the paths Path produces for valid keys and revisions.
func parsePath(p string) (Key, string, error) {
	parts := strings.Split(p, "/")
	if len(parts) != 4 {
		return Key{}, "", fmt.Errorf("artifact path %q: want <kind>/<namespace>/<name>/<revision>%s", p, Suffix)
	}
	k := Key{Kind: parts[0], Namespace: parts[1], Name: parts[2]}
	rev, ok := strings.CutSuffix(parts[3], Suffix)
	if !ok {
		return Key{}, "", fmt.Errorf("artifact path %q: the file must end in %s", p, Suffix)
	}
	if err := k.Validate(); err != nil {
		return Key{}, "", err
	}
	if err := ValidateRevision(rev); err != nil {
		return Key{}, "", err
	}
	return k, rev, nil
}
