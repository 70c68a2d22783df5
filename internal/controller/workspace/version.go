package workspace

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// MinimumPulumiVersion is the oldest Pulumi CLI the agent works with:
// every setup runs `pulumi install`, which appeared in v3.91.0. The local
// runtime uses the CLI `make tools` pins; a workspace image (spec.image)
// can bring any other.
var MinimumPulumiVersion = version.MustParseGeneric("3.91.0")

// checkPulumiVersion stalls a Workspace whose CLI is older than
// MinimumPulumiVersion, unless it skips the install (spec.skipInstall): no
// retry helps until the Workspace's spec changes (a newer spec.image). A
// version that does not parse (a development build) is let through: the
// calls that need newer features say so themselves.
func checkPulumiVersion(v string, skipInstall bool) error {
	got, err := version.ParseGeneric(v)
	if skipInstall || err != nil || got.AtLeast(MinimumPulumiVersion) {
		return nil
	}
	return sreconcile.NewStalling(autov1alpha1.WorkspaceReasonPulumiVersionTooLow,
		fmt.Errorf("spec.image: the workspace's Pulumi CLI (from its image, or the operator's tools for the local runtime) is %s; "+
			"stackyard needs %s or newer to install the program's dependencies (or set spec.skipInstall)", v, MinimumPulumiVersion))
}
