package testenv

import (
	"context"
	"path/filepath"

	"github.com/stackyard/stackyard/internal/devenv"
)

// PolicyDir holds the admission policies stackyard ships
// (ValidatingAdmissionPolicies and their bindings).
func PolicyDir() string { return filepath.Join(RepoRoot(), "config", "policy") }

// InstallPolicies applies the manifests in PolicyDir, as `kubectl apply
// -k config/policy` would, so that the API server enforces them in the
// tests as in a cluster.
func (e *Env) InstallPolicies(ctx context.Context) error {
	return devenv.ApplyDir(ctx, e.Client, PolicyDir())
}
