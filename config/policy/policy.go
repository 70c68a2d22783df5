// Package policy embeds the admission policies of this directory, so that
// the operator can check that the API server runs them as written (see
// internal/change.AdmissionGuard). The YAML files are the source: kustomize
// and the Helm chart install them, the tests apply them.
package policy

import "embed"

// Files holds every policy manifest of this directory (kustomization.yaml
// included, which holds no policy).
//
//go:embed *.yaml
var Files embed.FS
