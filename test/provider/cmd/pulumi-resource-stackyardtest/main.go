// Command pulumi-resource-stackyardtest is the stackyardtest Pulumi resource
// provider plugin, used only by stackyard's tests. The Pulumi engine starts
// it (found on PATH) for programs that use stackyardtest:index:* resources.
package main

import (
	"fmt"
	"os"

	"github.com/stackyard/stackyard/test/provider"
)

func main() {
	if err := provider.Main(os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-resource-%s: %v\n", provider.Name, err)
		os.Exit(1)
	}
}
