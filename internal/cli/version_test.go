package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestBuildInfo(t *testing.T) {
	saved := [3]string{Version, Commit, BuildDate}
	t.Cleanup(func() { Version, Commit, BuildDate = saved[0], saved[1], saved[2] })

	Version, Commit, BuildDate = "v1.2.3", "0123456789abcdef0123456789abcdef01234567", "2026-11-25T10:00:00Z"
	var out bytes.Buffer
	if err := ReadBuildInfo().Print(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{"stackyard v1.2.3", "commit: " + Commit, "built: " + BuildDate}
	if len(lines) != 4 || strings.Join(lines[:3], "\n") != strings.Join(want, "\n") || !strings.HasPrefix(lines[3], "go: go") {
		t.Errorf("printed\n%s\nwant\n%s\ngo: …", out.String(), strings.Join(want, "\n"))
	}

	// A test binary records no VCS information: the fields say so.
	Commit, BuildDate = "", ""
	if info := ReadBuildInfo(); info.Commit != "unknown" || info.BuildDate != "unknown" {
		t.Errorf("without stamps or VCS information: %+v", info)
	}
}
