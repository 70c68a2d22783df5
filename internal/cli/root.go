// Package cli builds stackyard's cobra command tree. Each subcommand lives in
// its own file and does no more than parse flags and call the package that
// owns the behaviour (internal/agent, internal/controller, ...).
package cli

import (
	"github.com/spf13/cobra"
)

// NewRootCommand returns the `stackyard` command with every subcommand
// attached. Subcommands register themselves through addCommands so that each
// file stays independent of the others.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "stackyard",
		Short:         "Deploy Pulumi stacks declared as Kubernetes objects, with change management built in",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	for _, add := range subcommands {
		root.AddCommand(add())
	}
	return root
}

// subcommands lists the constructors of the top-level subcommands. Files in
// this package append to it from init functions.
var subcommands []func() *cobra.Command
