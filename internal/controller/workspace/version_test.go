package workspace

import (
	"errors"
	"strings"
	"testing"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/pulumiversion"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

func TestCheckPulumiVersion(t *testing.T) {
	const (
		tooLow      = autov1alpha1.WorkspaceReasonPulumiVersionTooLow
		unsupported = autov1alpha1.WorkspaceReasonPulumiVersionUnsupported
	)
	for _, tt := range []struct {
		version     string
		stall       string // the reason, or "" for none
		skipInstall string // the reason with spec.skipInstall
	}{
		{pulumiversion.Pinned, "", ""},
		{"v" + pulumiversion.Pinned, "", ""},
		{"3.91.0", "", ""},
		{"3.171.0-alpha.x1234", "", ""},
		{"3.90.1", tooLow, ""},
		{"v2.25.2", tooLow, ""},
		{"4.0.0", unsupported, unsupported},
		{"v4.2.1", unsupported, unsupported},
		{"", "", ""},
		{"not a version", "", ""},
	} {
		for _, skip := range []bool{false, true} {
			want := tt.stall
			if skip {
				want = tt.skipInstall
			}
			err := checkPulumiVersion(tt.version, skip)
			var stalling *sreconcile.Stalling
			switch {
			case want == "" && err != nil:
				t.Errorf("%q (skipInstall %v): %v, want no error", tt.version, skip, err)
			case want != "" && (!errors.As(err, &stalling) || stalling.Reason != want):
				t.Errorf("%q (skipInstall %v): %v, want a %s stall", tt.version, skip, err, want)
			case want != "" && (!strings.Contains(err.Error(), "spec.image") || !strings.Contains(err.Error(), tt.version) ||
				!strings.Contains(err.Error(), pulumiversion.Supported())):
				t.Errorf("%q: %q does not name the field, the version and the supported range", tt.version, err)
			}
		}
	}
}
