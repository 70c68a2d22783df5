package change

import (
	"context"
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// ListReleases returns the Releases of pipeline in namespace: those its
// label names that say so in their spec too.
func ListReleases(ctx context.Context, c client.Reader, namespace, pipeline string) ([]promotionv1alpha1.Release, error) {
	var list promotionv1alpha1.ReleaseList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{promotionv1alpha1.PipelineLabel: pipeline}); err != nil {
		return nil, fmt.Errorf("listing the releases of pipeline %q: %w", pipeline, err)
	}
	return slices.DeleteFunc(list.Items, func(r promotionv1alpha1.Release) bool { return r.Spec.Pipeline != pipeline }), nil
}
