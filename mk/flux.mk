# Flux's source CRDs (GitRepository, OCIRepository, Bucket, ...), for the
# tests that resolve a Stack's spec.fluxSource against a real API server.
#
# They come from the Go module github.com/fluxcd/source-controller, pinned in
# tools/flux/go.mod: `go mod download -json` names the module's directory in
# the module cache, and its config/crd/bases/source.toolkit.fluxcd.io_*.yaml
# are copied into bin/crds/flux (tests pass that to testenv as an extra CRD
# directory). The copy is redone only when the pin changes.

FLUX_MODULE := github.com/fluxcd/source-controller
FLUX_CRDS_DIR := $(BIN)/crds/flux
# The stamp records the module version the copied CRDs came from.
FLUX_CRDS := $(FLUX_CRDS_DIR)/.version

TOOLS += $(FLUX_CRDS)

$(FLUX_CRDS): tools/flux/go.mod tools/flux/go.sum
	@echo ">> copying Flux source CRDs from $(FLUX_MODULE) (module tools/flux) into $(FLUX_CRDS_DIR)" >&2
	@set -euo pipefail; \
	json=$$(cd tools/flux && go mod download -json $(FLUX_MODULE)); \
	dir=$$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$$/\1/p' <<<"$$json"); \
	version=$$(sed -n 's/^[[:space:]]*"Version": "\(.*\)",*$$/\1/p' <<<"$$json"); \
	if [ -z "$$dir" ] || ! ls "$$dir"/config/crd/bases/source.toolkit.fluxcd.io_*.yaml >/dev/null 2>&1; then \
		echo "no Flux source CRDs found in the module cache for $(FLUX_MODULE): $$json" >&2; exit 1; \
	fi; \
	tmp="$(FLUX_CRDS_DIR).tmp.$$$$"; rm -rf "$$tmp"; mkdir -p "$$tmp"; \
	install -m 0644 "$$dir"/config/crd/bases/source.toolkit.fluxcd.io_*.yaml "$$tmp"/; \
	echo "$(FLUX_MODULE) $$version" > "$$tmp/.version"; \
	rm -rf "$(FLUX_CRDS_DIR)"; mkdir -p "$(dir $(FLUX_CRDS_DIR))"; mv "$$tmp" "$(FLUX_CRDS_DIR)"

.PHONY: flux-crds
flux-crds: $(FLUX_CRDS) ## Copy Flux's source CRDs into bin/crds/flux (part of `make tools`).
