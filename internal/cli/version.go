package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// Version is stamped at build time with -ldflags "-X .../internal/cli.Version=...".
var Version = "dev"

func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		return &cobra.Command{
			Use:   "version",
			Short: "Print the stackyard version",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), Version)
				return err
			},
		}
	})
}
