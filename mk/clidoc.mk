# The CLI reference (docs/cli-reference.md), written from the cobra commands
# of internal/cli by hack/clidoc: every command's usage, description and
# flags, as --help prints them. The staleness test in hack/clidoc fails
# when the committed file differs from what the commands say.

GENERATE_TARGETS += generate-cli-reference

##@ CLI reference

.PHONY: generate-cli-reference
generate-cli-reference: generate-api ## Write docs/cli-reference.md from the stackyard commands.
	go run ./hack/clidoc -o docs/cli-reference.md
