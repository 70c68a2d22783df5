// Package cli builds stackyard's cobra command tree. Each subcommand lives in
// its own file and does no more than parse flags and call the package that
// owns the behaviour (internal/agent, internal/controller, ...).
package cli

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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

// DocDefaultAnnotation is the pflag annotation of a flag whose default is
// computed from the machine or the environment the command runs on (the
// cores, $POD_NAMESPACE): its value says in words what the default is. The
// help shows the computed value, which is right for that machine; the CLI
// reference (docs/cli-reference.md, written by hack/clidoc) shows the
// words, so that it reads the same wherever it is generated.
const DocDefaultAnnotation = "stackyard.dev/doc-default"

// docDefault marks the flag name of fs with DocDefaultAnnotation.
func docDefault(fs *pflag.FlagSet, name, words string) {
	if err := fs.SetAnnotation(name, DocDefaultAnnotation, []string{words}); err != nil {
		panic(err) // a flag defined just before: only a typo gets here
	}
}

// subcommands lists the constructors of the top-level subcommands. Files in
// this package append to it from init functions.
var subcommands []func() *cobra.Command
