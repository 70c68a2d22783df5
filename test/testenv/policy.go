package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// PolicyDir holds the admission policies stackyard ships
// (ValidatingAdmissionPolicies and their bindings).
func PolicyDir() string { return filepath.Join(RepoRoot(), "config", "policy") }

// InstallPolicies creates every object of the manifests in PolicyDir, as
// `kubectl apply -k config/policy` would, so that the API server enforces
// them in the tests as in a cluster.
func (e *Env) InstallPolicies(ctx context.Context) error {
	files, err := filepath.Glob(filepath.Join(PolicyDir(), "*.yaml"))
	if err != nil {
		return err
	}
	for _, file := range files {
		if filepath.Base(file) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		for _, doc := range bytes.Split(data, []byte("\n---\n")) {
			if strings.TrimSpace(string(doc)) == "" {
				continue
			}
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			if err := e.Client.Create(ctx, obj); err != nil {
				return fmt.Errorf("%s: creating %s %s: %w", file, obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	return nil
}
