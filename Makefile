# stackyard — build, generate and test.
#
# The two commands a fresh machine needs are `make dev` (the main job) and
# `make test` (every test). Everything else they need is built from pinned
# modules under tools/ into bin/ the first time, and again only when a pin
# changes (make compares bin/<tool> with its module's go.mod and go.sum).

SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := help

BIN := $(CURDIR)/bin
BUILD_TOOL := hack/build-tool.sh

# Pinned versions live in the tools modules' go.mod files; these are the
# values that must also be stamped into a binary.
#
# PULUMI_VERSION is the one place Pulumi is pinned: `make generate`
# (hack/pin-pulumi.sh) carries it to tools/pulumi and the main module's
# go.mod, to internal/pulumiversion (the default workspace images and the
# tests read it there) and to the docs. A bump is this line and
# `make generate`.
PULUMI_VERSION := v3.274.1
KUBE_VERSION := v1.35.4
# kube-apiserver and kubectl report the version they were stamped with; built
# from the module cache they would otherwise say v0.0.0-master.
KUBE_LDFLAGS := $(foreach pkg,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(pkg).gitVersion=$(KUBE_VERSION) -X $(pkg).gitMajor=1 -X $(pkg).gitMinor=35 -X $(pkg).gitTreeState=clean)

# Test-time environment: isolate git and the Pulumi CLI from the developer's
# own configuration, and put bin/ first on PATH so the pinned pulumi, the YAML
# language host and the test provider are the ones found.
export GIT_CONFIG_GLOBAL := /dev/null
export GIT_CONFIG_NOSYSTEM := 1
export PATH := $(BIN):$(PATH)
export PULUMI_SKIP_UPDATE_CHECK := true
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION := true

GO_TEST_FLAGS ?= -count=1
TEST_TIMEOUT ?= 40m

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9\/.-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Tools

KUBE_APISERVER := $(BIN)/kube-apiserver
KUBECTL := $(BIN)/kubectl
ETCD := $(BIN)/etcd
PULUMI := $(BIN)/pulumi
PULUMI_YAML := $(BIN)/pulumi-language-yaml
CONTROLLER_GEN := $(BIN)/controller-gen

CONTROL_PLANE_TOOLS := $(ETCD) $(KUBE_APISERVER) $(KUBECTL)
PULUMI_TOOLS := $(PULUMI) $(PULUMI_YAML)
TOOLS := $(CONTROL_PLANE_TOOLS) $(PULUMI_TOOLS) $(CONTROLLER_GEN)

# Each area of the project keeps its own targets in mk/<area>.mk; they may
# append to TOOLS, GENERATE_TARGETS and TEST_DEPS, so they are read here,
# before the rules that use those lists. A rule inside mk/ sees only what
# the files before it appended, so a target there that needs every tool
# names the phony `tools`, never $(TOOLS).
GENERATE_TARGETS :=
TEST_DEPS :=
include $(sort $(wildcard mk/*.mk))

.PHONY: tools
tools: $(TOOLS) ## Build every pinned tool into bin/ (first time ~20 min on 2 cores).

$(ETCD): tools/etcd/go.mod tools/etcd/go.sum
	@$(BUILD_TOOL) tools/etcd $@ go.etcd.io/etcd/server/v3

$(KUBE_APISERVER): tools/kube/go.mod tools/kube/go.sum
	@$(BUILD_TOOL) tools/kube $@ k8s.io/kubernetes/cmd/kube-apiserver -ldflags "$(KUBE_LDFLAGS)"

$(KUBECTL): tools/kube/go.mod tools/kube/go.sum
	@$(BUILD_TOOL) tools/kube $@ k8s.io/kubernetes/cmd/kubectl -ldflags "$(KUBE_LDFLAGS)"

$(PULUMI): tools/pulumi/go.mod tools/pulumi/go.sum
	@$(BUILD_TOOL) tools/pulumi $@ github.com/pulumi/pulumi/pkg/v3/cmd/pulumi \
		-ldflags "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$(PULUMI_VERSION)"

$(PULUMI_YAML): tools/pulumi-yaml/go.mod tools/pulumi-yaml/go.sum
	@$(BUILD_TOOL) tools/pulumi-yaml $@ github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml

$(CONTROLLER_GEN): tools/codegen/go.mod tools/codegen/go.sum
	@$(BUILD_TOOL) tools/codegen $@ sigs.k8s.io/controller-tools/cmd/controller-gen

##@ Development

.PHONY: generate generate-api
generate: generate-api $(GENERATE_TARGETS) ## Regenerate deepcopy, CRDs, RBAC, the Pulumi pin (and what mk/*.mk adds).
	hack/pin-pulumi.sh
	hack/argocd-patch.sh

# The targets of mk/*.mk that compile the API types or copy the CRDs
# depend on this one, so that a new kind's DeepCopy exists before anything
# compiles it (make runs it once per invocation).
generate-api: $(CONTROLLER_GEN) ## Regenerate deepcopy, CRDs and RBAC from the API types and their markers.
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/generate-api.sh

.PHONY: fmt vet
fmt: ## gofmt every Go file.
	gofmt -l -w $$(git ls-files '*.go')
vet: ## go vet the main module.
	go vet ./...

# DEV_TOOLS are what `make dev` runs: the control plane, kubectl for the
# commands it suggests, the CLI and YAML host, and the sample's provider.
# The tools only tests use (helm, Flux, versitygw, protoc plugins,
# controller-gen) are left to `make test`.
DEV_TOOLS = $(CONTROL_PLANE_TOOLS) $(PULUMI_TOOLS) $(STACKYARDTEST_PROVIDER)
# DEV_FLAGS are extra flags for `stackyard dev`; CI passes
# --until-ready=<duration> so that the main job ends on its own.
DEV_FLAGS ?=

# STACKYARD_BINS builds bin/stackyard and bin/stackyard-agent from the work
# tree, stamped as test/testenv.BuildStackyard stamps them; go build
# relinks only when a source changed.
STACKYARD_BINS = go build -ldflags "$$(hack/version-ldflags.sh)" -o $(BIN)/ ./cmd/stackyard ./cmd/stackyard-agent

# Where `make install-cli` puts the stackyard CLI.
PREFIX ?= /usr/local

.PHONY: install-cli
install-cli: ## Install the stackyard CLI (approve, review, promote, ...) into $(PREFIX)/bin; needs only Go.
	@mkdir -p $(PREFIX)/bin
	CGO_ENABLED=0 go build -trimpath -ldflags "$$(hack/version-ldflags.sh)" -o $(PREFIX)/bin/stackyard ./cmd/stackyard
	@echo ">> installed $(PREFIX)/bin/stackyard: $$($(PREFIX)/bin/stackyard version 2>/dev/null | head -1)"

.PHONY: dev
dev: $(DEV_TOOLS) ## Run stackyard locally: control plane from bin/, state in .stackyard/ (Ctrl-C stops it).
	$(STACKYARD_BINS)
	exec $(BIN)/stackyard dev --state-dir $(CURDIR)/.stackyard --bin-dir $(BIN) --crd-dir $(CURDIR)/config/crd/bases --policy-dir $(CURDIR)/config/policy --webhook-dir $(CURDIR)/config/webhook $(DEV_FLAGS)

##@ Test

# TEST_P is how many test binaries go test runs at once (its -p). Most
# packages spend their time waiting on an API server, the Pulumi engine or
# git, which left a third of two cores idle at go's default of one per
# core; docs/development.md ("CI budget") has the figures.
TEST_P ?= 4
# TEST_FIRST are the slowest packages, named before ./... so that go test
# starts them first (it runs packages in the order named) and the rest fill
# the slots beside them; taken from the report at the end of `make test`.
TEST_FIRST := ./internal/controller/stack ./test/e2e ./internal/controller/promotion \
	./internal/agent/server ./test/surface ./internal/controller/pullrequest ./test/hostile
# The whole `go test -json` stream of the last `make test` is kept here, for
# digging deeper than hack/testreport's summary.
TEST_JSON := $(BIN)/go-test.json
# TEST_REPORT_FLAGS go to hack/testreport: -v prints every test's output as
# it comes, -top N lists N of the slowest packages and tests.
TEST_REPORT_FLAGS ?=

.PHONY: test
test: $(TOOLS) $(TEST_DEPS) ## Build what is missing, then run every test on the real components; ends with the slowest.
	@# golangci-lint's govet runs go vet's own analyzers (its defaults are
	@# cmd/vet's), test files included, so go vet does not run again.
	@echo ">> golangci-lint (govet included)"; $(GOLANGCI_LINT) run --config .golangci.yml ./...
	@echo ">> go test (real kube-apiserver, etcd, pulumi, git)"
	@go build -o $(BIN)/testreport ./hack/testreport
	@# The tests that run stackyard as a process copy these two binaries
	@# (test/testenv.BuildStackyard) rather than each package linking its own.
	@$(STACKYARD_BINS)
	STACKYARD_TEST_PREBUILT=$(BIN) go test $(GO_TEST_FLAGS) -vet=off -ldflags=-w -p $(TEST_P) -json -timeout $(TEST_TIMEOUT) $(TEST_FIRST) ./... \
		| tee $(TEST_JSON) | $(BIN)/testreport $(TEST_REPORT_FLAGS)

.PHONY: test-race
test-race: ## Run make test under Go's race detector (~12 min warm on 2 cores; not in CI).
	$(MAKE) test GO_TEST_FLAGS='$(GO_TEST_FLAGS) -race' TEST_TIMEOUT=90m

.PHONY: bench
bench: bench-e2e ## Run the benchmarks (performance targets are measured here, never asserted in tests).
	go test -run '^$$' -bench . -benchmem ./...
