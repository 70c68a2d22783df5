// Command stackyard-agent is the workspace agent alone: `stackyard-agent
// serve` is `stackyard agent serve` in a binary without the operator's
// packages; its --auth kubernetes works in a pod only (the service
// account's files, no kubeconfig). The local runtime starts one per
// Workspace that has work, so in a burst one per update, and each
// workspace pod runs one; half of an agent's start was the initialisation
// of packages it never used.
// It only wires the command; behaviour lives in internal/agent/serve.
package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/stackyard/stackyard/internal/agent/serve"
)

func main() {
	root := &cobra.Command{
		Use:               "stackyard-agent",
		Short:             "The stackyard workspace agent (`stackyard agent serve` without the operator)",
		SilenceUsage:      true,
		Args:              cobra.NoArgs,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.AddCommand(serve.Command(serve.InClusterAuth))
	if err := root.Execute(); err != nil {
		os.Exit(1)
	}
}
