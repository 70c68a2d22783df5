package workspace

import (
	"errors"
	"strings"
	"testing"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

func TestCheckPulumiVersion(t *testing.T) {
	for _, tt := range []struct {
		version string
		stalls  bool
	}{
		{"3.170.0", false},
		{"v3.170.0", false},
		{"3.91.0", false},
		{"3.171.0-alpha.x1234", false},
		{"4.0.0", false},
		{"3.90.1", true},
		{"v2.25.2", true},
		{"", false},
		{"not a version", false},
	} {
		if err := checkPulumiVersion(tt.version, true); err != nil {
			t.Errorf("%q with skipInstall: %v, want no error", tt.version, err)
		}
		err := checkPulumiVersion(tt.version, false)
		var stalling *sreconcile.Stalling
		switch {
		case !tt.stalls && err != nil:
			t.Errorf("%q: %v, want no error", tt.version, err)
		case tt.stalls && (!errors.As(err, &stalling) || stalling.Reason != autov1alpha1.WorkspaceReasonPulumiVersionTooLow):
			t.Errorf("%q: %v, want a PulumiVersionTooLow stall", tt.version, err)
		case tt.stalls && !strings.Contains(err.Error(), "spec.image") || tt.stalls && !strings.Contains(err.Error(), tt.version):
			t.Errorf("%q: %q does not name the field and the version", tt.version, err)
		}
	}
}
