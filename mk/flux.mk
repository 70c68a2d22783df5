# Flux's source-controller, for the tests that resolve a Stack's
# spec.fluxSource against a real API server and a real source-controller
# (test/fluxsc starts it as a process).
#
# Everything comes from the Go module github.com/fluxcd/source-controller,
# pinned in tools/flux/go.mod:
#
#   bin/source-controller   the controller itself, built like the other tools
#                           (5.6 min on 2 busy cores from an empty build
#                           cache: 5 min of CPU)
#   bin/crds/flux/          its source CRDs (GitRepository, OCIRepository,
#                           Bucket, ...), which tests pass to testenv as an
#                           extra CRD directory
#   bin/flux/role.yaml      its ClusterRole, which the tests bind to the
#                           ServiceAccount it runs as
#
# The manifests are copied from the module's directory in the module cache,
# which `go mod download -json` names. Everything is redone only when the
# pin changes.

FLUX_MODULE := github.com/fluxcd/source-controller
SOURCE_CONTROLLER := $(BIN)/source-controller
FLUX_CRDS_DIR := $(BIN)/crds/flux
FLUX_RBAC_DIR := $(BIN)/flux
# The stamp records the module version the copied manifests came from.
FLUX_CRDS := $(FLUX_CRDS_DIR)/.version

TOOLS += $(SOURCE_CONTROLLER) $(FLUX_CRDS)

$(SOURCE_CONTROLLER): tools/flux/go.mod tools/flux/go.sum
	@$(BUILD_TOOL) tools/flux $@ $(FLUX_MODULE)

$(FLUX_CRDS): tools/flux/go.mod tools/flux/go.sum
	@echo ">> copying Flux source CRDs and ClusterRole from $(FLUX_MODULE) (module tools/flux) into $(FLUX_CRDS_DIR) and $(FLUX_RBAC_DIR)" >&2
	@set -euo pipefail; \
	json=$$(cd tools/flux && go mod download -json $(FLUX_MODULE)); \
	dir=$$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$$/\1/p' <<<"$$json"); \
	version=$$(sed -n 's/^[[:space:]]*"Version": "\(.*\)",*$$/\1/p' <<<"$$json"); \
	if [ -z "$$dir" ] || ! ls "$$dir"/config/crd/bases/source.toolkit.fluxcd.io_*.yaml >/dev/null 2>&1 \
		|| [ ! -f "$$dir/config/rbac/role.yaml" ]; then \
		echo "no Flux source CRDs or ClusterRole found in the module cache for $(FLUX_MODULE): $$json" >&2; exit 1; \
	fi; \
	mkdir -p "$(FLUX_RBAC_DIR)"; \
	install -m 0644 "$$dir/config/rbac/role.yaml" "$(FLUX_RBAC_DIR)/role.yaml"; \
	tmp="$(FLUX_CRDS_DIR).tmp.$$$$"; rm -rf "$$tmp"; mkdir -p "$$tmp"; \
	install -m 0644 "$$dir"/config/crd/bases/source.toolkit.fluxcd.io_*.yaml "$$tmp"/; \
	echo "$(FLUX_MODULE) $$version" > "$$tmp/.version"; \
	rm -rf "$(FLUX_CRDS_DIR)"; mkdir -p "$(dir $(FLUX_CRDS_DIR))"; mv "$$tmp" "$(FLUX_CRDS_DIR)"

##@ Flux

.PHONY: flux-crds flux-tools
flux-crds: $(FLUX_CRDS) ## Copy Flux's source CRDs and ClusterRole into bin/ (part of `make tools`).
flux-tools: $(SOURCE_CONTROLLER) $(FLUX_CRDS) ## Build Flux's source-controller and copy its manifests into bin/ (part of `make tools`).
