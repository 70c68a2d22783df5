package operator

import (
	"context"
	"fmt"

	"github.com/stackyard/stackyard/internal/change"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/stackyard/stackyard/internal/controller/pipeline"
	"github.com/stackyard/stackyard/internal/controller/promotion"
	"github.com/stackyard/stackyard/internal/controller/pullrequest"
	"github.com/stackyard/stackyard/internal/controller/stage"
	"github.com/stackyard/stackyard/internal/metrics"
	"github.com/stackyard/stackyard/internal/source"
)

// The admission guard reads the policies and their bindings by name.
//
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get

// setupPromotion adds the change-management controllers
// (promotion.stackyard.dev: Pipelines, Stages, Promotions) to mgr. The
// Pipeline controller shares poller with the Stack controller.
func setupPromotion(ctx context.Context, mgr manager.Manager, opts Options, poller *source.Poller) error {
	if err := (&pipeline.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("pipeline-controller"), Poller: poller,
		Options: pipeline.Options{MinInterval: opts.MinResync, StallAfter: opts.StallAfter},
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("pipeline controller: %w", err)
	}
	// The Stage and Promotion controllers share cache indexes (stages by
	// Stack, upstream and pipeline; promotions by stage).
	if err := change.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("stage indexes: %w", err)
	}
	// One guard for both: it reads the admission policies at most every
	// few seconds, live (they are cluster-scoped and few).
	admission := &change.AdmissionGuard{Reader: mgr.GetAPIReader()}
	if err := (&stage.Reconciler{
		Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("stage-controller"), StallAfter: opts.StallAfter,
		Admission: admission,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("stage controller: %w", err)
	}
	promotions := metrics.NewPromotions()
	if err := metrics.RegisterCollectors(append(promotions.Collectors(), &metrics.RolloutCollector{Reader: mgr.GetClient()})...); err != nil {
		return fmt.Errorf("promotion metrics: %w", err)
	}
	if err := (&promotion.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("promotion-controller"),
		Metrics: promotions, Admission: admission,
	}).SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("promotion controller: %w", err)
	}
	if err := (&pullrequest.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("pullrequest-controller"),
		DashboardURL: opts.DashboardURL,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("pull-request controller: %w", err)
	}
	return nil
}
