// Command stackyard is the single binary of the stackyard operator: the
// controller manager, the workspace agent and the developer tools are its
// subcommands. It only wires the command tree; behaviour lives in internal/.
package main

import (
	"os"

	"github.com/stackyard/stackyard/internal/cli"
)

func main() {
	if err := cli.NewRootCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
