package devenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// ApplyDir applies, by server-side apply, every object of the YAML
// manifests in dir (documents separated by "---"), as `kubectl apply -f dir`
// would; a kustomization.yaml is skipped. The admission policies of
// config/policy are installed this way, in `stackyard dev` and in tests.
func ApplyDir(ctx context.Context, c client.Client, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
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
			if err := c.Patch(ctx, obj, client.Apply, client.FieldOwner("stackyard-dev"), client.ForceOwnership); err != nil {
				return fmt.Errorf("%s: applying %s %s: %w", file, obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	return nil
}
