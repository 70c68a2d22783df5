// Command pulumi-resource-kubernetes is Pulumi's Kubernetes provider, built
// from its Go module for the tests and the agent image. The module does not
// ship the minified schema and Terraform mapping its own main package
// embeds; hack/build-kubernetes-provider.sh derives them (embed-schema)
// beside this file before it builds.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema-embed.json
var schema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	provider.Serve("kubernetes", version.Version, schema, terraformMapping)
}
