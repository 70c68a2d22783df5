package change

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
)

// The cache indexes the Stage and Promotion controllers (and the
// dashboard) share, registered once by SetupIndexes. They are a contract between the two controllers,
// so they live here, where both may read them.
const (
	// StackIndex indexes Stages by the names of the Stacks they bind.
	StackIndex = "stage.spec.stacks.name"
	// SelectorIndex indexes the Stages that select Stacks by label
	// (spec.stackSelector) under HasSelector.
	SelectorIndex = "stage.spec.stackSelector"
	// UpstreamIndex indexes Stages by the names of their upstream stages.
	UpstreamIndex = "stage.spec.sources.stages"
	// PipelineIndex indexes Stages by their pipeline.
	PipelineIndex = "stage.spec.pipeline"
	// PromotionStageIndex indexes Promotions by spec.stage. It has the
	// name of the field so that the same selector serves the cache and the
	// API server (spec.stage is a selectable field of Promotions).
	PromotionStageIndex = "spec.stage"
	// RecordPromotionIndex indexes StackPromotions by the promotion they
	// name, under the name of that selectable field, so that the same
	// selector serves the cache and the API server.
	RecordPromotionIndex = "promotion"
)

// HasSelector is the value SelectorIndex holds for a Stage that selects
// Stacks by label.
const HasSelector = "set"

// SetupIndexes registers the indexes above with indexer; call it once,
// before setting up the Stage and Promotion controllers.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	for name, f := range stageIndexes {
		err := indexer.IndexField(ctx, &promotionv1alpha1.Stage{}, name, func(obj client.Object) []string {
			if st, ok := obj.(*promotionv1alpha1.Stage); ok {
				return f(st)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if err := indexer.IndexField(ctx, &promotionv1alpha1.Promotion{}, PromotionStageIndex, promotionStage); err != nil {
		return err
	}
	return indexer.IndexField(ctx, &promotionv1alpha1.StackPromotion{}, RecordPromotionIndex, RecordPromotion)
}

// RecordPromotion is the value of RecordPromotionIndex for a
// StackPromotion: the promotion it names.
func RecordPromotion(obj client.Object) []string {
	if rec, ok := obj.(*promotionv1alpha1.StackPromotion); ok {
		return []string{rec.Promotion}
	}
	return nil
}

// stageIndexes are the values each Stage index holds for a Stage.
var stageIndexes = map[string]func(*promotionv1alpha1.Stage) []string{
	StackIndex: func(st *promotionv1alpha1.Stage) []string {
		names := make([]string, 0, len(st.Spec.Stacks))
		for _, b := range st.Spec.Stacks {
			names = append(names, b.Name)
		}
		return names
	},
	SelectorIndex: func(st *promotionv1alpha1.Stage) []string {
		if st.Spec.StackSelector == nil {
			return nil
		}
		return []string{HasSelector}
	},
	UpstreamIndex: func(st *promotionv1alpha1.Stage) []string { return st.Spec.Sources.Stages },
	PipelineIndex: func(st *promotionv1alpha1.Stage) []string { return []string{st.Spec.Pipeline} },
}

// promotionStage is the value of PromotionStageIndex for a Promotion.
func promotionStage(obj client.Object) []string {
	if p, ok := obj.(*promotionv1alpha1.Promotion); ok {
		return []string{p.Spec.Stage}
	}
	return nil
}
