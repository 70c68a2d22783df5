# Pulumi's Kubernetes provider (pulumi-resource-kubernetes), the real-world
# provider test/programs deploys with on the test API server and make
# test-cluster on the real node, built from its Go module as pinned in
# tools/pulumi-kubernetes/go.mod. The module lacks the minified schema its
# main package embeds; hack/build-kubernetes-provider.sh derives it first.
# The engine finds the provider on PATH, which has bin/ first.

PULUMI_KUBERNETES := $(BIN)/pulumi-resource-kubernetes

TOOLS += $(PULUMI_KUBERNETES)
TEST_DEPS += $(PULUMI_KUBERNETES)

$(PULUMI_KUBERNETES): tools/pulumi-kubernetes/go.mod tools/pulumi-kubernetes/go.sum \
		$(wildcard tools/pulumi-kubernetes/cmd/*/*.go) hack/build-kubernetes-provider.sh
	@hack/build-kubernetes-provider.sh $@
