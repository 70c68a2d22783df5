# Protocol buffers: the workspace agent's gRPC API (internal/agent/proto).
#
# protoc itself comes from Debian (protobuf-compiler), installed on first use;
# the Go plugins are built from the pinned module tools/proto into bin/.

PROTOC_GEN_GO := $(BIN)/protoc-gen-go
PROTOC_GEN_GO_GRPC := $(BIN)/protoc-gen-go-grpc
PROTO_TOOLS := $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC)

TOOLS += $(PROTO_TOOLS)
GENERATE_TARGETS += generate-proto
# The staleness test in internal/agent/agentpb regenerates the code, so it
# needs protoc and the plugins.
TEST_DEPS += protoc $(PROTO_TOOLS)

$(PROTOC_GEN_GO): tools/proto/go.mod tools/proto/go.sum
	@$(BUILD_TOOL) tools/proto $@ google.golang.org/protobuf/cmd/protoc-gen-go

$(PROTOC_GEN_GO_GRPC): tools/proto/go.mod tools/proto/go.sum
	@$(BUILD_TOOL) tools/proto $@ google.golang.org/grpc/cmd/protoc-gen-go-grpc

##@ Protobuf

.PHONY: protoc
protoc: ## Install protoc (Debian's protobuf-compiler) when it is missing.
	@command -v protoc >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler; }

.PHONY: generate-proto
generate-proto: protoc $(PROTO_TOOLS) ## Regenerate the agent's gRPC code into internal/agent/agentpb.
	@internal/agent/proto/generate.sh internal/agent/agentpb
