# A real S3-compatible server for the tests that keep Pulumi state in a
# bucket or read a Flux Bucket source (test/s3server): versitygw, with its
# posix backend, verifying every request's SigV4 signature.
#
# It is built from the Go module github.com/versity/versitygw, pinned in
# tools/s3/go.mod, like the other tools (80 s on 2 busy cores from an empty
# build cache: 100 s of CPU), and stamped with the pinned version, which
# `versitygw --version` reports.

VERSITYGW := $(BIN)/versitygw

TOOLS += $(VERSITYGW)

# Recursive ('='), so the go command runs only when versitygw is built.
VERSITYGW_VERSION = $(shell cd tools/s3 && go list -m -f '{{.Version}}' github.com/versity/versitygw)

$(VERSITYGW): tools/s3/go.mod tools/s3/go.sum
	@$(BUILD_TOOL) tools/s3 $@ github.com/versity/versitygw/cmd/versitygw \
		-ldflags "-X main.Version=$(VERSITYGW_VERSION) -X main.Build=$(VERSITYGW_VERSION)"

##@ S3

.PHONY: s3-tools
s3-tools: $(VERSITYGW) ## Build versitygw, the S3 server of the tests, into bin/ (part of `make tools`).
