package pulumiversion

import "testing"

func TestRange(t *testing.T) {
	for _, tt := range []struct {
		version string
		want    int
	}{
		{Pinned, 0},
		{"v" + Pinned, 0},
		{Minimum, 0},
		{"3.171.0-alpha.x1234", 0},
		{"3.999.0", 0},
		{"3.90.1", -1},
		{"v2.25.2", -1},
		{Unsupported, 1},
		{"4.0.0-alpha.1", 1}, // a pre-release of 4 is 4 already
		{"v4.1.0", 1},
		{"", 0},
		{"not a version", 0},
	} {
		if got := Range(tt.version); got != tt.want {
			t.Errorf("Range(%q) = %d, want %d", tt.version, got, tt.want)
		}
	}
}
