# golangci-lint, pinned in tools/lint, with the configuration in
# .golangci.yml. `make test` runs it first, and fails on any finding.

GOLANGCI_LINT := $(BIN)/golangci-lint
TEST_DEPS += $(GOLANGCI_LINT)
# LINT_TAGS are build tags to lint the suites behind them with, e.g.
# `make lint LINT_TAGS=cluster`.
LINT_TAGS ?=

$(GOLANGCI_LINT): tools/lint/go.mod tools/lint/go.sum
	@$(BUILD_TOOL) tools/lint $(abspath $@) github.com/golangci/golangci-lint/v2/cmd/golangci-lint

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (.golangci.yml) on the main module (~1 min; `make test` runs it too).
	$(GOLANGCI_LINT) run --config .golangci.yml $(if $(LINT_TAGS),--build-tags $(LINT_TAGS)) ./...
