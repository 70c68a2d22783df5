# Flux's source-controller, for the tests that resolve a Stack's
# spec.fluxSource against a real API server and a real source-controller
# (test/fluxsc starts it as a process), and Flux's kustomize-controller,
# for the GitOps tests that sync Stack, Stage and Pipeline manifests from
# git (test/fluxkc, test/gitops).
#
# Everything comes from the Go modules github.com/fluxcd/source-controller
# and github.com/fluxcd/kustomize-controller, pinned together in
# tools/flux/go.mod:
#
#   bin/source-controller   the controller itself, built like the other tools
#                           (5.6 min on 2 busy cores from an empty build
#                           cache: 5 min of CPU)
#   bin/kustomize-controller  the same for kustomize-controller, built only
#                           for `make test-gitops` and `make test-cluster`
#                           (docs/walkthrough.md runs with Flux) (5 min on 2
#                           cores shared with another build, 4 min of CPU;
#                           most of its dependencies are source-controller's)
#   bin/crds/flux/          their CRDs (GitRepository, OCIRepository,
#                           Bucket, ..., Kustomization), which tests pass to
#                           testenv as an extra CRD directory
#   bin/flux/role.yaml      source-controller's ClusterRole, and
#   bin/flux/kustomize-role.yaml  kustomize-controller's, which the tests
#                           bind to the ServiceAccounts they run as
#
# The manifests are copied from the modules' directories in the module
# cache, which `go mod download -json` names. Everything is redone only
# when the pins change.

FLUX_MODULE := github.com/fluxcd/source-controller
FLUX_KUSTOMIZE_MODULE := github.com/fluxcd/kustomize-controller
SOURCE_CONTROLLER := $(BIN)/source-controller
KUSTOMIZE_CONTROLLER := $(BIN)/kustomize-controller
FLUX_CRDS_DIR := $(BIN)/crds/flux
FLUX_RBAC_DIR := $(BIN)/flux
# The stamp records the module version the copied manifests came from.
FLUX_CRDS := $(FLUX_CRDS_DIR)/.version

TOOLS += $(SOURCE_CONTROLLER) $(FLUX_CRDS)

$(SOURCE_CONTROLLER): tools/flux/go.mod tools/flux/go.sum
	@$(BUILD_TOOL) tools/flux $@ $(FLUX_MODULE)

$(KUSTOMIZE_CONTROLLER): tools/flux/go.mod tools/flux/go.sum
	@$(BUILD_TOOL) tools/flux $@ $(FLUX_KUSTOMIZE_MODULE)

$(FLUX_CRDS): tools/flux/go.mod tools/flux/go.sum
	@echo ">> copying Flux's CRDs and ClusterRoles from $(FLUX_MODULE) and $(FLUX_KUSTOMIZE_MODULE) (module tools/flux) into $(FLUX_CRDS_DIR) and $(FLUX_RBAC_DIR)" >&2
	@set -euo pipefail; \
	moddir() { \
		json=$$(cd tools/flux && go mod download -json "$$1"); \
		dir=$$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$$/\1/p' <<<"$$json"); \
		if [ -z "$$dir" ] || ! ls "$$dir"/config/crd/bases/*.toolkit.fluxcd.io_*.yaml >/dev/null 2>&1 \
			|| [ ! -f "$$dir/config/rbac/role.yaml" ]; then \
			echo "no Flux CRDs or ClusterRole found in the module cache for $$1: $$json" >&2; exit 1; \
		fi; \
		echo "$$dir"; \
	}; \
	src=$$(moddir $(FLUX_MODULE)); kus=$$(moddir $(FLUX_KUSTOMIZE_MODULE)); \
	mkdir -p "$(FLUX_RBAC_DIR)"; \
	install -m 0644 "$$src/config/rbac/role.yaml" "$(FLUX_RBAC_DIR)/role.yaml"; \
	install -m 0644 "$$kus/config/rbac/role.yaml" "$(FLUX_RBAC_DIR)/kustomize-role.yaml"; \
	tmp="$(FLUX_CRDS_DIR).tmp.$$$$"; rm -rf "$$tmp"; mkdir -p "$$tmp"; \
	install -m 0644 "$$src"/config/crd/bases/source.toolkit.fluxcd.io_*.yaml "$$tmp"/; \
	install -m 0644 "$$kus"/config/crd/bases/kustomize.toolkit.fluxcd.io_*.yaml "$$tmp"/; \
	echo "$(FLUX_MODULE) $$(basename "$$src") $(FLUX_KUSTOMIZE_MODULE) $$(basename "$$kus")" > "$$tmp/.version"; \
	rm -rf "$(FLUX_CRDS_DIR)"; mkdir -p "$(dir $(FLUX_CRDS_DIR))"; mv "$$tmp" "$(FLUX_CRDS_DIR)"

##@ Flux

.PHONY: flux-crds flux-tools flux-kustomize
flux-crds: $(FLUX_CRDS) ## Copy Flux's CRDs and ClusterRoles into bin/ (part of `make tools`).
flux-tools: $(SOURCE_CONTROLLER) $(FLUX_CRDS) ## Build Flux's source-controller and copy Flux's manifests into bin/ (part of `make tools`).
flux-kustomize: $(KUSTOMIZE_CONTROLLER) ## Build Flux's kustomize-controller into bin/ (for `make test-gitops` and `make test-cluster`).

# The walkthrough (test/cluster TestWalkthrough) runs Flux's two
# controllers against the test cluster. (test-cluster's recipe is in
# mk/cluster.mk, read before this file sets these names.)
test-cluster: $(SOURCE_CONTROLLER) $(KUSTOMIZE_CONTROLLER) $(FLUX_CRDS)

# The GitOps suite (test/gitops, build tag gitops): Flux's source- and
# kustomize-controller sync Stack, Stage and Pipeline manifests from git
# while the operator deploys and promotes them (docs/flux.md). It is not
# in `make test`, whose warm budget it would overrun; .ci/run runs it.
.PHONY: test-gitops
test-gitops: tools $(KUSTOMIZE_CONTROLLER) ## Sync stackyard manifests from git with Flux's real controllers (test/gitops; docs/flux.md).
	@$(STACKYARD_BINS)
	STACKYARD_TEST_PREBUILT=$(BIN) go test -tags gitops -count=1 -timeout 20m -v ./test/gitops/...
