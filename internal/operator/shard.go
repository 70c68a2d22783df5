package operator

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/dashboard"
	"github.com/stackyard/stackyard/internal/shard"
)

// checkShardOptions refuses, on a named shard, the services that span
// shards: they are the default shard's (internal/shard), and a named shard
// that served them would show its own Stacks as all there are.
func checkShardOptions(opts Options) error {
	if opts.Shard.IsDefault() {
		return nil
	}
	for flag, addr := range map[string]string{
		"--cloud-api-bind-address": opts.CloudAPIAddr,
		"--dashboard-bind-address": opts.DashboardAddr,
		"--receiver-bind-address":  opts.ReceiverAddr,
	} {
		if addr != "" && addr != "0" {
			return fmt.Errorf("operator: %s=%s: shard %s cannot serve it; the default shard serves it for every shard", flag, addr, opts.Shard)
		}
	}
	return nil
}

// shardCache caches the kinds that belong to shards for this shard only:
// Workspaces and Updates always, and Stacks on a named shard. The default
// shard caches every Stack, as the controllers it alone runs (pipelines,
// the dashboard, the cloud API) read Stacks of every shard; its Stack
// controller leaves other shards' Stacks alone.
func shardCache(s shard.Shard) map[client.Object]cache.ByObject {
	sel := s.Selector()
	if sel.Empty() {
		return nil
	}
	byObject := map[client.Object]cache.ByObject{
		&autov1alpha1.Workspace{}: {Label: sel},
		&autov1alpha1.Update{}:    {Label: sel},
	}
	if !s.IsDefault() {
		byObject[&pulumiv1.Stack{}] = cache.ByObject{Label: sel}
	}
	return byObject
}

// addHub adds what only the default shard runs: the cloud API, Receivers,
// Alerts and the dashboard.
func addHub(ctx context.Context, mgr manager.Manager, opts Options) (*dashboard.Server, error) {
	if err := addCloudAPI(ctx, mgr, opts); err != nil {
		return nil, err
	}
	if err := addReceivers(mgr, opts); err != nil {
		return nil, err
	}
	if err := addAlerts(mgr, opts); err != nil {
		return nil, err
	}
	return addDashboard(mgr, opts)
}
