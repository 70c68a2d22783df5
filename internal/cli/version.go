package cli

import (
	"cmp"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version, Commit and BuildDate are stamped at build time with -ldflags
// "-X github.com/stackyard/stackyard/internal/cli.Version=v1.2.3" (and so
// on; hack/version-ldflags.sh prints them for the current commit). Left
// empty, Commit and BuildDate come from the VCS information the Go
// toolchain records in the binary, when it does. The date is the commit's,
// which keeps builds reproducible.
var (
	Version   = "dev"
	Commit    = ""
	BuildDate = ""
)

// BuildInfo is what `stackyard version` prints.
type BuildInfo struct {
	// Version is the release version, or "dev".
	Version string
	// Commit is the source commit, with "-dirty" when the tree had
	// uncommitted changes; "unknown" when not recorded.
	Commit string
	// BuildDate is when the source was committed (RFC 3339), or the
	// stamped build date; "unknown" when not recorded.
	BuildDate string
	// GoVersion and Platform describe the binary.
	GoVersion, Platform string
}

// ReadBuildInfo returns the binary's version information.
func ReadBuildInfo() BuildInfo {
	info := BuildInfo{Version: Version, Commit: Commit, BuildDate: BuildDate,
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, when string
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if rev != "" && modified {
			rev += "-dirty"
		}
		info.Commit, info.BuildDate = cmp.Or(info.Commit, rev), cmp.Or(info.BuildDate, when)
	}
	info.Commit, info.BuildDate = cmp.Or(info.Commit, "unknown"), cmp.Or(info.BuildDate, "unknown")
	return info
}

// Print writes the information, one "key: value" per line after the
// version.
func (b BuildInfo) Print(w io.Writer) error {
	_, err := fmt.Fprintf(w, "stackyard %s\ncommit: %s\nbuilt: %s\ngo: %s %s\n", b.Version, b.Commit, b.BuildDate, b.GoVersion, b.Platform)
	return err
}

func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		return &cobra.Command{
			Use:   "version",
			Short: "Print the stackyard version, the commit it was built from and when",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return ReadBuildInfo().Print(cmd.OutOrStdout())
			},
		}
	})
}
