package workspace

import (
	"fmt"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/pulumiversion"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

// checkPulumiVersion stalls a Workspace whose CLI the agent cannot drive:
// older than pulumiversion.Minimum (unless it skips the install,
// spec.skipInstall, the one step that needs it), or of a major version the
// agent does not know (pulumiversion.Unsupported or newer). No retry helps
// until the Workspace's spec changes (another spec.image). A version that
// does not parse (a development build) is let through.
func checkPulumiVersion(v string, skipInstall bool) error {
	switch pulumiversion.Range(v) {
	case -1:
		if skipInstall {
			return nil
		}
		return sreconcile.NewStalling(autov1alpha1.WorkspaceReasonPulumiVersionTooLow,
			fmt.Errorf("spec.image: the workspace's Pulumi CLI (from its image, or the operator's tools for the local runtime) is %s; "+
				"stackyard needs %s or newer to install the program's dependencies (or set spec.skipInstall); it supports %s",
				v, pulumiversion.Minimum, pulumiversion.Supported()))
	case 1:
		return sreconcile.NewStalling(autov1alpha1.WorkspaceReasonPulumiVersionUnsupported,
			fmt.Errorf("spec.image: the workspace's Pulumi CLI (from its image, or the operator's tools for the local runtime) is %s; "+
				"this stackyard supports %s: use an image of Pulumi 3, or a stackyard release that supports %s",
				v, pulumiversion.Supported(), v))
	}
	return nil
}
