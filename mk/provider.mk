# The stackyardtest Pulumi resource provider (test/provider): File, Random,
# Sleep and Fail resources that tests deploy through the real Pulumi engine.
#
# Unlike the pinned tools it is built from the main module, so it is rebuilt
# whenever its own sources (or the embedded schema.json, or the module's
# dependencies) change. The engine finds it on PATH, which has bin/ first.

STACKYARDTEST_PROVIDER := $(BIN)/pulumi-resource-stackyardtest
STACKYARDTEST_PROVIDER_SRCS := $(shell find test/provider -name '*.go' -not -name '*_test.go') \
	test/provider/schema.json go.mod go.sum

TOOLS += $(STACKYARDTEST_PROVIDER)
# The provider's own tests run it under the pinned CLI and YAML host.
TEST_DEPS += $(STACKYARDTEST_PROVIDER) $(PULUMI_TOOLS)

$(STACKYARDTEST_PROVIDER): $(STACKYARDTEST_PROVIDER_SRCS)
	@echo ">> building $(notdir $@) from ./test/provider" >&2
	@go build -o $@ ./test/provider/cmd/pulumi-resource-stackyardtest
